"""Tests written for bugs planted in the search indexes (issue 20; docs/testing.md, "Planted bugs in the
search indexes"): the vector shard and index, the mirrors' change-log sync, the BM25 mirror and index,
and the pending-vector notes. Each test names the planted bug it kills.

Expected values are literals of the spec (the modules' docstrings) or computed independently: cosine
with numpy over the vectors as given, BM25 with bm25s (tests.helpers.bm25_oracle)."""

from __future__ import annotations

import numpy as np
import pytest
import redis

from agtos.config import Settings
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.mirror_sync import MirrorRegistry
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25
from tests.helpers import bm25_oracle
from tests.test_bm25_mirror import connectors  # noqa: F401  (two connections: two API processes)
from tests.test_vector_index import MakeIndex, basis, make_index, unit_rows  # noqa: F401  (make_index: a fixture)


def cosine_top(vectors: dict[str, np.ndarray], query: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """The ``limit`` most similar of ``vectors`` to ``query`` by numpy cosine, best first."""
    sims = {d: float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))) for d, v in vectors.items()}
    return sorted(sims.items(), key=lambda hit: (-hit[1], hit[0]))[:limit]


def found(index_hits: list[tuple[str, float]]) -> set[str]:
    return {doc_id for doc_id, _ in index_hits}


# -- vector shard and index --------------------------------------------------------------------------
def test_a_deleted_vector_never_takes_a_live_ones_place(
    make_index: MakeIndex,  # noqa: F811
) -> None:
    """Planted: a deleted row's similarity taken as 0 rather than -inf in the exact search, so it
    outranked live vectors of negative similarity and the search gave fewer hits than it had."""
    index = make_index()
    vectors = {"gone": basis(0), "b": basis(1), "c": basis(2)}
    index.add_many("alice", list(vectors), np.stack(list(vectors.values())))
    index.search("alice", basis(0), limit=1)  # loads the shard: the delete below leaves a tombstone in it
    assert index.remove("alice", "gone") is True
    query = -(basis(1) + 2 * basis(2))
    want = cosine_top({d: v for d, v in vectors.items() if d != "gone"}, query, 2)
    assert [d for d, _ in want] == ["b", "c"]
    for hits in (index.search("alice", query, 2, -1.0), index.exact_search("alice", query, 2, -1.0)):
        assert [d for d, _ in hits] == ["b", "c"]
        assert [s for _, s in hits] == pytest.approx([s for _, s in want], abs=1e-6)


def test_a_graph_is_built_at_its_minimum_size_and_deleted_vectors_leave_it(
    make_index: MakeIndex,  # noqa: F811
) -> None:
    """Planted: the graph built only above ``hnsw_min_size`` (the spec: once a shard reaches it); a
    delete that left the vector's label in the HNSW graph, whose candidates were then all deleted
    ones (the search found nothing near them)."""
    rng = np.random.default_rng(8)
    near = basis(0) + 0.05 * unit_rows(rng, 60)  # the 60 nearest to the query, deleted below
    vectors = {f"n{i}": v for i, v in enumerate(near)} | {f"r{i}": v for i, v in enumerate(unit_rows(rng, 240))}
    index = make_index(hnsw_min_size=300, build_in_background=False)
    index.add_many("alice", list(vectors), np.stack(list(vectors.values())))
    assert found(index.search("alice", basis(0), 60)) == {f"n{i}" for i in range(60)}
    assert index.stats()["hnswUsers"] == 1
    assert index.remove_many("alice", [f"n{i}" for i in range(60)]) == 60
    left = {d: v for d, v in vectors.items() if d.startswith("r")}
    hits = index.search("alice", basis(0), 10, -1.0)
    assert [d for d, _ in hits] == [d for d, _ in cosine_top(left, basis(0), 10)]


def test_graph_candidates_tied_in_bf16_are_rescored_in_float32(
    make_index: MakeIndex,  # noqa: F811
) -> None:
    """Planted: the graph asked for ``limit`` candidates rather than ``limit + 10``: vectors that its
    bf16 copy cannot tell apart came back in graph order, not re-scored best first in float32."""
    rng = np.random.default_rng(0)
    ties = {f"t{i:02d}": basis(0) + (0.3 + i * 1e-4) * basis(1) for i in range(12)}  # t00 nearest
    vectors = {f"f{i}": v for i, v in enumerate(unit_rows(rng, 100))} | dict(reversed(ties.items()))
    index = make_index(hnsw_min_size=50, build_in_background=False)
    index.add_many("alice", list(vectors), np.stack(list(vectors.values())))
    index.search("alice", basis(0), 1)  # loads the shard and builds the graph
    assert index.stats()["hnswUsers"] == 1
    hits = index.search("alice", basis(0), 3)
    want = cosine_top(vectors, basis(0), 3)
    assert [d for d, _ in want] == ["t00", "t01", "t02"]
    assert [d for d, _ in hits] == ["t00", "t01", "t02"]
    assert [s for _, s in hits] == pytest.approx([s for _, s in want], abs=1e-6)


# -- the mirrors' change-log sync ---------------------------------------------------------------------
def test_a_mirror_behind_a_trimmed_log_of_a_batch_reloads(
    make_index: MakeIndex,  # noqa: F811
) -> None:
    """Planted: the log's floor read one rank too low when a batch trimmed several entries, so a mirror
    whose next change was trimmed replayed the rest of the log and missed it."""
    writer, reader = make_index(max_change_log=3), make_index(max_change_log=3)
    writer.add("alice", "x", basis(0))
    assert found(reader.search("alice", basis(0), 1)) == {"x"}  # the reader's mirror at version 1
    writer.add("alice", "a", basis(1))  # version 2, trimmed from the log by the batch below
    writer.add_many("alice", ["b", "c", "d"], np.stack([basis(2), basis(3), basis(4)]))
    assert found(reader.search("alice", basis(1), 10, -1.0)) == {"x", "a", "b", "c", "d"}


def test_a_processs_own_write_does_not_skip_anothers(
    make_index: MakeIndex,  # noqa: F811
) -> None:
    """Planted: a process moved its mirror to the version of its own write even when another process
    had written in between, so the other write was never read."""
    mine, theirs = make_index(), make_index()
    mine.add("alice", "x", basis(0))
    assert found(mine.search("alice", basis(0), 1)) == {"x"}
    theirs.add("alice", "theirs", basis(1))
    mine.add("alice", "mine", basis(2))
    assert found(mine.search("alice", basis(1), 10, -1.0)) == {"x", "theirs", "mine"}


def test_a_mirror_of_a_wiped_index_reloads_even_when_the_new_life_has_more_versions(
    make_index: MakeIndex,  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Planted: the epoch left out of the sync check, so a mirror of the index's former life (a forgotten
    user) replayed the new life's log past its old version: it kept the forgotten vector and missed the
    new life's first ones."""
    reader, writer = make_index(), make_index()
    reader.add("alice", "old", basis(0))
    assert found(reader.search("alice", basis(0), 1)) == {"old"}
    for key in raw_redis.scan_iter(match=f"{key_prefix}:u:{{alice}}:*"):
        raw_redis.delete(key)  # forget-all removes the user's keys
    for i in range(3):
        writer.add("alice", f"new{i}", basis(1 + i))
    assert found(reader.search("alice", basis(0), 10, -1.0)) == {"new0", "new1", "new2"}


def test_the_least_recently_used_mirror_is_the_one_dropped() -> None:
    """Planted: a mirror used again not moved to the end, so the registry dropped the oldest created
    (first in, first out) rather than the least recently used (the spec)."""
    registry: MirrorRegistry[object] = MirrorRegistry(object, 2)
    first = registry.get("u1")
    registry.get("u2")
    assert registry.get("u1") is first
    registry.get("u3")
    assert registry.peek("u1") is first
    assert registry.peek("u2") is None


# -- BM25 index ---------------------------------------------------------------------------------------
def test_a_search_from_redis_reads_only_the_highest_tf_max_postings(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
) -> None:
    """Planted: one posting more than ``max_postings`` read per term (the spec: "only the highest-tf
    ``max_postings`` per query term are read"); scores keep the term's full document frequency."""
    corpus = {"d1": "apple", "d2": "apple apple", "d3": "apple apple apple", "d4": "pear"}
    index = BM25Index(connectors[0], GlobalKeys(settings.key_prefix), "memory", max_postings=2, mirror=False)
    index.add_many("alice", list(corpus.items()))
    want = bm25_oracle({d: bm25.tokenize(t) for d, t in corpus.items()}, bm25.query_terms("apple"), 10)
    assert [d for d, _ in want] == ["d3", "d2", "d1"]
    hits = index.search("alice", "apple", 10)
    assert [d for d, _ in hits] == ["d3", "d2"]
    assert [s for _, s in hits] == pytest.approx([s for _, s in want[:2]], rel=1e-9)
