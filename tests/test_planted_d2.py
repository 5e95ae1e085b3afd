"""Planted bugs in the code landed in 6c484ff..4bad2d5 (issue 20, d2) that the owners' tests let through.

Each test names the planted bug it kills (docs/testing.md, "Planted bugs in the code landed in
6c484ff..4bad2d5"). Real Redis (the test's DB); expected values are the README's and the docstrings' literals.
"""

from __future__ import annotations

import pytest
import redis
import Stemmer

from agtos.memory import dreamer_pipeline, ingestion_pipeline, reindex
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.reindex import ReindexReport
from agtos.schemas import Conclusion, ConclusionType, Episode, Role, Turn
from agtos.schemas.records import now_ms
from agtos.storage.keys import GlobalKeys
from agtos.storage.record_reads import RecordReads
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import UserLock, waiting_at_most
from agtos.tasks.bm25 import upgraded_term
from agtos.tasks.verbatim_turns import TurnBatch, stored_turns, turn_units
from tests import test_query_ingest

connector = test_query_ingest.connector  # fixture: a RedisConnector on the test's Redis DB

LOCK_MS = 5_000  # the lock's expiry here (60 s in agtos)


@pytest.fixture
def lock(connector: RedisConnector, key_prefix: str) -> UserLock:
    return UserLock(connector, GlobalKeys(key_prefix), "writers", lock_ms=LOCK_MS)


def _key(prefix: str) -> str:
    """The README's key of user ``wes``'s memory writers' lock."""
    return f"{prefix}:u:{{wes}}:writers:memories"


def test_the_bound_ends_with_its_block(lock: UserLock, raw_redis: redis.Redis, key_prefix: str) -> None:
    """ul2: ``waiting_at_most`` bounds the first lock taken *within* it; a block that took none leaves no
    bound behind, and a lock taken after it waits for its holder (here one that releases after 0.4 s)."""
    key = _key(key_prefix)
    with waiting_at_most(0.05):
        pass  # a request that took no lock (a 404 before its first)
    assert raw_redis.set(key, "holder", px=400)
    with lock.held("wes", "memories"):
        assert raw_redis.get(key) != b"holder"  # taken after the holder's key went, not refused


def _said(text: str, at_ms: int, confidence: float, turns: tuple[str, ...] = ()) -> Conclusion:
    """A conclusion a Dreamer run found at ``at_ms`` (its id, as a run's, made of its text), citing the
    turns ``turns`` ('<episode id>.t<position>', their episodes in that order) or none."""
    return Conclusion(
        id=f"con-d2-{text.split()[2]}",
        user_id="dee",
        text=text,
        type=ConclusionType.explicit,
        confidence=confidence,
        source_episode_ids=list(dict.fromkeys(t.rpartition(".t")[0] for t in turns)),
        source_turn_ids=list(turns),
        created_at=at_ms,
        updated_at=at_ms,
    )


def test_a_conclusion_found_again_keeps_its_first_creation_and_one_citing_no_episode_is_stored(
    coordinator: MemoryCoordinator,
) -> None:
    """dp1-dp4, co2 (``store_conclusions``: "keep created_at"; "one citing no episode at all is stored as
    before"). A run at 1,000 ms stores two conclusions that cite no episode; a run at 5,000 ms finds one of
    them again: it is updated at 5,000 and still created at 1,000; the run's stamp is the latest of its own
    (5,000 and 4,000 found: 5,000 for both). Listed newest written first (``ConclusionStore.all``)."""
    rt = coordinator.services
    first = [_said("User loves mint tea", 1_000, 0.8), _said("User hates black tea", 900, 0.7)]
    dreamer_pipeline.store_conclusions(rt, "dee", first)
    again = [_said("User loves mint tea", 4_000, 0.85), _said("User loves oolong tea", 5_000, 0.6)]
    dreamer_pipeline.store_conclusions(rt, "dee", again)

    listed = [(c.text, c.created_at, c.updated_at, c.confidence) for c in rt.conclusions.all("dee")]
    assert listed == [  # newest written first, then the more confident
        ("User loves mint tea", 1_000, 5_000, 0.85),
        ("User loves oolong tea", 5_000, 5_000, 0.6),
        ("User hates black tea", 1_000, 1_000, 0.7),
    ]


def test_the_profile_order_is_run_then_confidence_then_latest_episode_then_its_latest_turn() -> None:
    """dp5, dp8, dp10 (``profile_order``'s docstring): the latest run's first, then the more confident,
    then the time of its latest episode (the last it cites), then its latest turn's position *there*.
    Episodes said at 100 (ep-1), 200 (ep-2), 300 (ep-3), 400 (ep-4)."""
    said = {"ep-1": 100, "ep-2": 200, "ep-3": 300, "ep-4": 400}
    conclusions = [
        _said("User once loved black tea", 1_000, 0.95, ("ep-4.t0",)),  # an older run: last, however confident
        _said("User loves green tea", 2_000, 0.8, ("ep-2.t1",)),
        _said("User loves mint tea", 2_000, 0.8, ("ep-1.t0", "ep-3.t1")),  # latest episode ep-3, not ep-1
        _said("User loves chai", 2_000, 0.7, ("ep-3.t9", "ep-4.t2")),  # ep-4's turn 2 (not ep-3's 9)
        _said("User loves oolong tea", 2_000, 0.7, ("ep-4.t5",)),
    ]
    ordered = [c.text for c in dreamer_pipeline.profile_order(conclusions, said)]
    assert ordered == [
        "User loves mint tea",
        "User loves green tea",
        "User loves oolong tea",
        "User loves chai",
        "User once loved black tea",
    ]


def test_a_turn_too_long_to_index_is_neither_indexed_by_a_reindex_nor_counted_as_lacking(
    coordinator: MemoryCoordinator,
) -> None:
    """ri1, vr1 (``reindex._lacking_turns`` and ``vector_repair._index_ingested``, "as TurnStore.save"): an
    episode whose id is 126 characters keeps its turn ("e…e.t0", 129 characters) unindexed. A reindex
    embeds the episode (stored without a vector) and no vector of that turn; a second one embeds nothing."""
    rt = coordinator.services
    episode = Episode(id="e" * 126, user_id="dee", summary="Dee plays the oboe on Sundays.", timestamp=1_000)
    turns = stored_turns("dee", episode.id, "s-1", [Turn(role=Role.user, content="I play the oboe on Sundays.")])
    ingestion_pipeline.index_batch(rt, [episode], [], None, TurnBatch(turns, turn_units(turns)))

    first, again = ReindexReport(), ReindexReport()
    assert reindex.reindex_user(rt, "dee", [], first) and reindex.reindex_user(rt, "dee", [], again)

    assert (first.embedded, again.embedded) == (1, 0)
    assert rt.semantic.store("episode").vectors.missing("dee", [episode.id]) == []
    assert rt.semantic.turns.vectors.missing("dee", [f"{episode.id}.t0"]) == [f"{episode.id}.t0"]


def test_a_profile_rebuild_orders_by_the_time_of_each_conclusions_latest_episode(
    coordinator: MemoryCoordinator,
) -> None:
    """dp11 (``refresh_profile``: "the time of its latest episode"): two preferences of one run, equally
    confident; mint tea was said in the first and the third session, green tea in the second. Mint tea,
    said last, comes first in the profile (its first session would put it after green tea)."""
    rt = coordinator.services
    hour = 3_600_000
    sessions = {"ep-d2-a": 3, "ep-d2-b": 2, "ep-d2-c": 1}  # hours ago
    episodes = [
        Episode(id=e, user_id="dee", summary=f"Session {e}.", timestamp=now_ms() - h * hour)
        for e, h in sessions.items()
    ]
    ingestion_pipeline.index_batch(rt, episodes, [], None, TurnBatch([], []))
    mint = _said("User loves mint tea", 5_000, 0.8, ("ep-d2-a.t0", "ep-d2-c.t0"))
    green = _said("User loves green tea", 5_000, 0.8, ("ep-d2-b.t0",))
    dreamer_pipeline.store_conclusions(
        rt, "dee", [c.model_copy(update={"category": "preference"}) for c in (mint, green)]
    )

    dreamer_pipeline.refresh_profile(rt, "dee", episodes)

    assert rt.profiles.get("dee").preferences == ["User loves mint tea", "User loves green tea"]


@pytest.mark.parametrize("word", ["james", "agnes", "dickens", "charles"])
def test_a_possessive_of_a_version_2_index_is_upgraded_to_its_words_stem(word: str) -> None:
    """bm4 (``upgraded_term``: version 2 terms "with 's (left as written) are stemmed now"): "james's" was
    stored as written; upgraded, it is the Snowball stem of "james" (PyStemmer: "jame"), the term a search
    for "James" or "James's" looks up, not the bare word."""
    assert upgraded_term(f"{word}'s", 2) == Stemmer.Stemmer("english").stemWord(word) != word


def test_the_memory_scan_keeps_record_keys_only(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """rr1 (``RecordReads.memory_keys``: record keys, index and collection keys skipped): a key under the
    user's memories whose last part is not a record id by the README's rule ("mem-2" and a newline, as
    another program may write) is not one of them."""
    base = f"{key_prefix}:u:{{dee}}:memory:"
    for name in ("mem-1", "mem-2\n", "_idx:bm25"):
        raw_redis.set(base + name, "{}")
    assert RecordReads(connector, GlobalKeys(key_prefix)).memory_keys("dee") == [base + "mem-1"]
