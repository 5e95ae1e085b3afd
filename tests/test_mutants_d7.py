"""Issue 20 (d7): the survivors of ``tools/mutation_direct.py`` in :meth:`SemanticStore.rank` at 690a96a, and
planted bugs in the tie rule (``shared_ranks``: exactly equal scores; ``weighted_evidence``: a formula's turns)
and in the embedded Redis's fsync setting (``agtos keys``'s two connectors).

``rank`` called with its query alone (README: ``hybrid`` by default, ``limit`` 10, every positive cosine), a
hybrid search without a query vector (the keyword list alone), and a search with mirrors synced for its mode
(no Redis call: neither a BM25 search in vector mode nor a BM25 mirror read again). RRF k = 60 literals over
``tests/test_core_semantic_store.py``'s set-up on a real Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agtos.cli_keys import auth_is_on, key_store
from agtos.config import EmbeddedRedisFsync, Settings
from agtos.memory.recall import weighted_evidence
from agtos.schemas import Role, StoredTurn
from agtos.storage import redis_conn
from agtos.storage.redis_conn import EmbeddedRedis, RedisConnector
from agtos.storage.semantic_store import SemanticStore, sync_mirrors
from agtos.storage.turns import TurnMatch
from agtos.tasks.ranking import shared_ranks
from tests import test_env_settings
from tests.test_core_semantic_store import (
    QUERY,
    CountingConnector,
    connector,
    hits,
    make_store,
    put_ranked,
    store,
)
from tests.test_embedded_redis_fsync import appendfsync

__all__ = ["connector", "store"]  # the fixtures, used by name
env = test_env_settings.env  # fixture: a clean environment


def test_rank_given_only_its_query_is_a_hybrid_search_for_10(connector: RedisConnector, key_prefix: str) -> None:
    """Pools of 1 x limit: the 10 closest of 12 vectors (d1..d10, cosine 0.995 down: min_similarity 0 keeps them),
    and d12, the one keyword hit, at keyword rank 1 (a tie with d1 at 1/61, in first-appearance order)."""
    store = make_store(connector, key_prefix, candidate_factor=1)
    put_ranked(store, 12, keyword_ids=("d12",))
    ranked = store.rank("alice", "zyxtrel", QUERY)
    expected = [("d1", pytest.approx(1 / 61), "semantic"), ("d12", pytest.approx(1 / 61), "keyword")]
    expected += [(f"d{rank}", pytest.approx(1 / (60 + rank)), "semantic") for rank in range(2, 11)]
    assert hits(list(ranked)) == expected


def test_hybrid_without_a_query_vector_is_the_keyword_list(store: SemanticStore) -> None:
    put_ranked(store, 3, keyword_ids=("d2",))
    assert hits(store.search("alice", "zyxtrel", None, limit=3)) == [("d2", pytest.approx(1 / 61), "keyword")]


@pytest.mark.parametrize(
    ("mode", "expected"), [("hybrid", ["d2", "d1", "d3"]), ("vector", ["d1", "d2", "d3"]), ("bm25", ["d2"])]
)
def test_rank_with_mirrors_synced_for_its_mode_makes_no_redis_call(
    settings: Settings, key_prefix: str, mode: str, expected: list[str]
) -> None:
    counting = CountingConnector(settings.redis_url, settings.data_dir)
    store = make_store(counting, key_prefix)
    put_ranked(store, 3, keyword_ids=("d2",))
    (mirrors,) = sync_mirrors("alice", [store], mode)  # type: ignore[arg-type]
    counting.calls = 0
    ranked = store.rank("alice", "zyxtrel", QUERY, mode, 3, mirrors=mirrors)  # type: ignore[arg-type]
    assert [r.id for r in ranked[:]] == expected
    assert counting.calls == 0
    counting.close()


def test_scores_tie_only_when_exactly_equal() -> None:
    """0.1 + 0.2 is 0.30000000000000004, above 0.3: not tied with it (no rounding, no tolerance)."""
    assert shared_ranks([("a", 0.1 + 0.2), ("b", 0.3), ("c", 0.3), ("d", 0.29999)]) == [
        ("a", 1.0),
        ("b", 2.5),
        ("c", 2.5),
        ("d", 4.0),
    ]


def said(episode_id: str, position: int, content: str, score: float, name: str = "Jon") -> TurnMatch:
    turn = StoredTurn(
        user_id="u", episode_id=episode_id, position=position, role=Role.user, name=name, content=content, timestamp=1
    )
    return TurnMatch(turn, score, ())


def test_a_formula_s_turns_all_weigh_its_best_score_over_its_sessions() -> None:
    """ "Talk to you soon!" said 4 times in 3 sessions (one written without case or punctuation): each turn weighs
    its best score 0.9 / 3 sessions = 0.3, tied; a turn said once weighs its score, divided by 1.5
    (OTHER_SPEAKER) when its speaker is not the one asked about; best first, ties in their given order."""
    formula = [
        said("e1", 5, "Talk to you soon!", 0.6),
        said("e2", 7, "talk to you SOON", 0.9),
        said("e3", 2, "Talk to you soon.", 0.3),
        said("e1", 9, "Talk to you soon!", 0.2),
    ]
    job, other = said("e4", 1, "I work as a nurse", 0.4), said("e5", 3, "I work at the bank", 0.75, name="Gina")
    turns = [*formula, job, other]
    assert weighted_evidence(turns, {"jon"}) == [
        (other, pytest.approx(0.5)),
        (job, pytest.approx(0.4)),
        *[(m, pytest.approx(0.3)) for m in formula],
    ]
    assert weighted_evidence(turns[:2] + turns[4:], {"jon"}) == [  # said in 2 sessions: not a formula
        (turns[1], pytest.approx(0.9)),
        (turns[0], pytest.approx(0.6)),
        (other, pytest.approx(0.5)),
        (job, pytest.approx(0.4)),
    ]
    # asked about Gina: Jon's formula weighs 0.9 / 1.5 / 3, his job 0.4 / 1.5
    assert [w for _, w in weighted_evidence(turns, {"gina"})] == pytest.approx([0.75, 0.4 / 1.5, 0.2, 0.2, 0.2, 0.2])
    assert [w for _, w in weighted_evidence(turns, formulas=False)] == pytest.approx([0.9, 0.75, 0.6, 0.4, 0.3, 0.2])


def test_the_key_commands_start_the_embedded_redis_with_the_fsync_setting(env: pytest.MonkeyPatch) -> None:
    """``agtos keys`` (:func:`key_store`) and ``agtos serve``'s check of a public host (:func:`auth_is_on`) each
    start the embedded server of the settings: its own ``CONFIG GET appendfsync``, read as it starts."""
    env.delenv("REDIS_URL")
    env.setenv("AGTOS_EMBEDDED_REDIS_FSYNC", "everysec")
    started: list[str] = []

    class Recorded(EmbeddedRedis):
        def __init__(self, data_dir: Path, fsync: EmbeddedRedisFsync = "always") -> None:
            super().__init__(data_dir, fsync)
            started.append(appendfsync(self.socket_path))

    env.setattr(redis_conn, "EmbeddedRedis", Recorded)
    settings = Settings.from_env()
    with key_store(settings) as keys:
        assert not keys.enabled()
    assert not auth_is_on(settings)
    assert started == ["everysec", "everysec"]
