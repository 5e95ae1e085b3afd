"""Issue 14: in a hybrid search, hits of exactly equal score share one rank in the RRF (the mean of the
places they take: fractional ranking), so their ids (a hash of user and text, or random) change nothing.
RRF k = 60 literals over a store on a real Redis (``tests/test_core_semantic_store.py``'s set-up), and the
ranks of :func:`shared_ranks` beside ``scipy.stats.rankdata(method="average")``."""

from __future__ import annotations

import pytest
from scipy.stats import rankdata  # type: ignore[import-untyped]

from agtos.storage.semantic_store import SemanticStore
from agtos.tasks.ranking import fuse_evidence, fuse_scored, shared_ranks
from tests.test_core_semantic_store import QUERY, connector, hits, put, ranked_vector, store

__all__ = ["connector", "store"]  # the fixtures, used by name


@pytest.mark.parametrize(
    "scores",
    [[3.0, 2.0, 2.0, 1.0], [5.0, 5.0, 5.0], [2.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25], [4.0], []],
)
def test_shared_ranks_are_the_mean_of_the_tied_places(scores: list[float]) -> None:
    ids = [f"d{i}" for i in range(len(scores))]
    want = rankdata([-s for s in scores], method="average") if scores else []
    assert shared_ranks(zip(ids, scores, strict=True)) == list(zip(ids, [float(r) for r in want], strict=True))


def test_fuse_scored_gives_tied_ids_one_share_and_counts_a_repeated_id_once() -> None:
    # list 0: a 1, b and c tied at 2.5, d 4; list 1 (weight 2): c 1, a 2, "c" again 3 (counted at 1 only)
    fused = fuse_scored(
        [[("a", 9.0), ("b", 7.0), ("c", 7.0), ("d", 1.0)], [("c", 0.9), ("a", 0.5), ("c", 0.4)]], 60, [1.0, 2.0]
    )
    assert fused == [
        ("c", pytest.approx(1 / 62.5 + 2 / 61)),
        ("a", pytest.approx(1 / 61 + 2 / 62)),
        ("b", pytest.approx(1 / 62.5)),
        ("d", pytest.approx(1 / 64)),
    ]
    with pytest.raises(ValueError, match=r"^got 1 weights for 2 lists$"):
        fuse_scored([[("a", 1.0)], [("b", 1.0)]], weights=[1.0])


def test_fuse_evidence_gives_equal_scores_of_a_scored_list_one_rank() -> None:
    """Turn evidence e1 0.5, e2 and e3 tied at 0.2 (both rank 2.5), e2 again at 0.1 (rank 4); the episode list
    has no scores: e3 rank 1, e1 rank 2 (weight 0.5)."""
    owners = {"turn": ["e1", "e2", "e3", "e2"], "episode": ["e3", "e1"]}
    weights, scored = {"turn": 1.0, "episode": 0.5}, {"turn": [0.5, 0.2, 0.2, 0.1]}
    assert fuse_evidence(owners, weights, scored=scored) == [
        ("e1", pytest.approx(1 / 61 + 0.5 / 62)),
        ("e3", pytest.approx(1 / 62.5 + 0.5 / 61)),
        ("e2", pytest.approx(1 / 62.5)),
    ]
    assert fuse_evidence(owners, weights, depth=2, scored=scored) == [
        ("e2", pytest.approx(1 / 62.5 + 1 / 64)),
        ("e1", pytest.approx(1 / 61 + 0.5 / 62)),
        ("e3", pytest.approx(1 / 62.5 + 0.5 / 61)),
    ]
    with pytest.raises(ValueError):  # a score for each item of the list, no more, no fewer
        fuse_evidence(owners, weights, scored={"turn": [0.5, 0.2, 0.2]})


@pytest.mark.parametrize("names", [("t1", "t2"), ("t2", "t1")])
def test_equal_bm25_scores_share_a_rank_whatever_the_ids(store: SemanticStore, names: tuple[str, str]) -> None:
    """ "zyxtrel" twice in ``a`` (the best BM25 score, the farthest vector); "zyxtrel hiking" and "zyxtrel
    invoices" once in as long a text (equal BM25 scores: both rank 2.5 in the keyword list, by id one of
    them was 2nd, the other 3rd), "invoices" the closer vector. Named either way round, the same scores."""
    hiking, invoices = names
    put(store, "a", "zyxtrel zyxtrel", ranked_vector(3))
    put(store, hiking, "zyxtrel hiking", ranked_vector(2))
    put(store, invoices, "zyxtrel invoices", ranked_vector(1))
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=3)) == [
        (invoices, pytest.approx(1 / 61 + 1 / 62.5), "hybrid"),
        ("a", pytest.approx(1 / 63 + 1 / 61), "hybrid"),
        (hiking, pytest.approx(1 / 62 + 1 / 62.5), "hybrid"),
    ]
