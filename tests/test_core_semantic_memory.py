"""The semantic tier's memory writes on a real Redis (README "Facts that change over time"): a memory
stated again keeps its first-seen time and unions its sources; a later fact of the same subject and
attribute closes the earlier one (``valid_until`` = the later fact's ``valid_from``, ``superseded_by``)
instead of deleting it, in whichever order the two were learned; an edit and a delete keep the
history, the timeline and the slot index in step; deleting the newer fact makes the older current
again. Expected values are literals (ids, texts, times, the documented history actions)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
import redis

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.semantic import SemanticMemory
from agtos.providers.embedding_base import EmbeddingTimeout
from agtos.providers.embeddings import OllamaEmbedder
from agtos.schemas import Episode, Memory
from agtos.storage.pending_vectors import PendingVectors
from tests.stub_servers import hash_embedding
from tests.test_embedder_breaker import HangableEmbedServer

JAN = 1_704_700_800_000  # 2024-01-08 08:00 UTC
MAR = 1_710_489_600_000  # 2024-03-15 08:00 UTC
MAY = 1_715_760_000_000  # 2024-05-15 08:00 UTC


def mem(
    memory_id: str, text: str, at: int, sources: tuple[str, ...] = (), user: str = "alice", importance: float = 0.5
) -> Memory:
    return Memory(
        id=memory_id,
        user_id=user,
        text=text,
        valid_from=at,
        created_at=at,
        source_episode_ids=list(sources),
        importance=importance,
    )


@pytest.fixture
def sem(coordinator: MemoryCoordinator) -> SemanticMemory:
    return coordinator.semantic


def stored(sem: SemanticMemory, memory_id: str, user: str = "alice") -> Memory:
    return Memory.model_validate_json(sem.records("memory", user, [memory_id])[memory_id])


def validity(sem: SemanticMemory, memory_id: str, user: str = "alice") -> tuple[int, int | None, str | None]:
    m = stored(sem, memory_id, user)
    return m.valid_from, m.valid_until, m.superseded_by


def history(sem: SemanticMemory, memory_id: str, user: str = "alice") -> list[tuple[object, ...]]:
    return [
        (c.action, c.origin, c.related_id, c.text, c.valid_from, c.valid_until, c.source_episode_id)
        for c in sem.history.history(user, memory_id)
    ]


def test_a_new_memory_is_stored_indexed_timed_and_its_creation_recorded(sem: SemanticMemory) -> None:
    cat = mem("m-cat", "User owns a grey cat", JAN, ("ep-2", "ep-1"), importance=0.7)
    london = mem("m-london", "User lives in London", MAR)
    assert sem.write_memories([cat, london], None) == 2
    assert stored(sem, "m-cat") == cat
    assert history(sem, "m-cat") == [("created", "extracted", None, "User owns a grey cat", JAN, None, "ep-2")]
    assert history(sem, "m-london") == [("created", "extracted", None, "User lives in London", MAR, None, None)]
    assert sem.history.page("alice", 0, 10) == (["m-london", "m-cat"], 2)  # newest valid_from first
    assert sem.history.slot_ids("alice", ["user|lives-in"]) == ["m-london"]
    assert sem.history.slot_ids("alice", ["user|works-at"]) == []
    assert [h.id for h in sem.search("memory", "alice", "grey cat", 5, "bm25").results] == ["m-cat"]
    # a write by the user says so in the history
    sem.write_memories([mem("m-tea", "User prefers green tea", MAY)], None, origin="user")
    assert history(sem, "m-tea") == [("created", "user", None, "User prefers green tea", MAY, None, None)]
    assert sem.records("memory", "bob", ["m-cat"]) == {}


def test_a_restated_memory_keeps_first_seen_and_unions_its_sources(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-cat", "User owns a grey cat", MAR, ("ep-1",), importance=0.8)], None)
    again = mem("m-cat", "User owns a grey cat", MAY, ("ep-2", "ep-1"), importance=0.3)
    assert sem.write_memories([again], None) == 1
    merged = stored(sem, "m-cat")
    assert merged.source_episode_ids == ["ep-1", "ep-2"]
    assert (merged.created_at, merged.importance, merged.valid_from, merged.valid_until) == (MAR, 0.8, MAR, None)
    assert history(sem, "m-cat") == [
        ("created", "extracted", None, "User owns a grey cat", MAR, None, "ep-1"),
        ("restated", "extracted", None, "User owns a grey cat", MAR, None, "ep-2"),
    ]
    # stated earlier than first seen: valid from the earlier time; the same sources again add no entry
    sem.write_memories([mem("m-cat", "User owns a grey cat", JAN, ("ep-1",), importance=0.9)], None)
    merged = stored(sem, "m-cat")
    assert (merged.valid_from, merged.importance, merged.source_episode_ids) == (JAN, 0.9, ["ep-1", "ep-2"])
    assert len(history(sem, "m-cat")) == 2


def test_a_later_fact_closes_the_earlier_one_stored_before(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-rome", "Maria lives in Rome", JAN)], None)  # another subject
    assert sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR, ("ep-9",))], None) == 1
    assert validity(sem, "m-london") == (JAN, MAR, "m-berlin")
    assert validity(sem, "m-berlin") == (MAR, None, None)
    assert validity(sem, "m-rome") == (JAN, None, None)
    assert history(sem, "m-london") == [
        ("created", "extracted", None, "User lives in London", JAN, None, None),
        ("superseded", "supersession", "m-berlin", "User lives in London", JAN, MAR, None),
    ]
    assert history(sem, "m-berlin") == [
        ("created", "extracted", None, "User lives in Berlin", MAR, None, "ep-9"),
        ("supersedes", "supersession", "m-london", "User lives in Berlin", MAR, None, None),
    ]
    assert sem.history.slot_ids("alice", ["user|lives-in"]) == ["m-berlin", "m-london"]
    # the closed fact is kept, still searchable
    assert {h.id for h in sem.search("memory", "alice", "London", 5, "bm25").results} == {"m-london"}


def test_an_ended_value_closes_the_fact_that_states_it(sem: SemanticMemory) -> None:
    """'left Feedzai' states no attribute slot: the earlier job is found by its value's words."""
    sem.write_memories([mem("m-job", "User works at Feedzai", JAN), mem("m-cat", "User owns a grey cat", JAN)], None)
    sem.write_memories([mem("m-left", "User left Feedzai", MAR)], None)
    assert validity(sem, "m-job") == (JAN, MAR, "m-left")
    assert validity(sem, "m-cat") == (JAN, None, None)
    assert validity(sem, "m-left") == (MAR, None, None)


def test_a_fact_that_ends_one_value_and_states_another_closes_both_kinds_of_earlier_fact(sem: SemanticMemory) -> None:
    """'moved from Lisbon to Porto' both ends a value (Lisbon, looked up by its words) and states where
    the user lives now: the earlier home found through the slot index (Madrid) is closed too."""
    sem.write_memories([mem("m-madrid", "User lives in Madrid", JAN), mem("m-cat", "User owns a grey cat", JAN)], None)
    sem.write_memories([mem("m-porto", "User moved from Lisbon to Porto", MAR)], None)
    assert validity(sem, "m-madrid") == (JAN, MAR, "m-porto")
    assert validity(sem, "m-cat") == (JAN, None, None)


@pytest.mark.parametrize(
    ("batch", "closed", "by", "until"),
    [
        (
            [("m-berlin", "User lives in Berlin", MAR), ("m-london", "User lives in London", JAN)],
            "m-london",
            "m-berlin",
            MAR,
        ),
        (
            [("m-london", "User lives in London", JAN), ("m-berlin", "User lives in Berlin", MAR)],
            "m-london",
            "m-berlin",
            MAR,
        ),
        # equal times: the later statement in the batch is the current one
        (
            [("m-london", "User lives in London", JAN), ("m-berlin", "User lives in Berlin", JAN)],
            "m-london",
            "m-berlin",
            JAN,
        ),
        (
            [("m-berlin", "User lives in Berlin", JAN), ("m-london", "User lives in London", JAN)],
            "m-berlin",
            "m-london",
            JAN,
        ),
    ],
)
def test_facts_of_one_batch_close_each_other_in_the_order_they_became_true(
    sem: SemanticMemory, batch: list[tuple[str, str, int]], closed: str, by: str, until: int
) -> None:
    assert sem.write_memories([mem(i, t, at) for i, t, at in batch], None) == 2
    assert validity(sem, closed)[1:] == (until, by)
    assert validity(sem, by)[1:] == (None, None)
    assert [c[:3] for c in history(sem, closed)] == [("created", "extracted", None), ("superseded", "supersession", by)]
    assert [c[:3] for c in history(sem, by)] == [("created", "extracted", None), ("supersedes", "supersession", closed)]


def test_a_chain_in_one_batch_closes_each_fact_by_the_next_one_in_time(sem: SemanticMemory) -> None:
    """Ids sort the other way round from the times: the order that counts is when each became true."""
    batch = [
        mem("m-x", "User lives in Porto", MAY),
        mem("m-z", "User lives in London", JAN),
        mem("m-y", "User lives in Berlin", MAR),
    ]
    assert sem.write_memories(batch, None) == 3
    assert validity(sem, "m-z") == (JAN, MAR, "m-y")
    assert validity(sem, "m-y") == (MAR, MAY, "m-x")
    assert validity(sem, "m-x") == (MAY, None, None)


def test_an_unrelated_fact_of_the_batch_does_not_stop_the_search_for_earlier_ones(sem: SemanticMemory) -> None:
    """The cat fact (earlier than London in time) ends nothing: Berlin still closes London after it."""
    sem.write_memories([mem("m-london", "User lives in London", MAR)], None)
    sem.write_memories([mem("m-cat", "User owns a grey cat", JAN), mem("m-berlin", "User lives in Berlin", MAY)], None)
    assert validity(sem, "m-london") == (MAR, MAY, "m-berlin")
    assert validity(sem, "m-cat") == (JAN, None, None)


def test_a_later_fact_that_ends_a_value_closes_an_earlier_one_listed_after_it(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-left", "User left Feedzai", MAR), mem("m-job", "User works at Feedzai", JAN)], None)
    assert validity(sem, "m-job") == (JAN, MAR, "m-left")
    assert validity(sem, "m-left") == (MAR, None, None)


def test_a_new_fact_stated_at_the_same_time_as_a_stored_one_is_the_current_one(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", JAN)], None)
    assert validity(sem, "m-london") == (JAN, JAN, "m-berlin")
    assert validity(sem, "m-berlin") == (JAN, None, None)


def test_a_back_filled_older_fact_is_closed_by_the_later_one_already_stored(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR)], None)
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    assert validity(sem, "m-london") == (JAN, MAR, "m-berlin")
    assert validity(sem, "m-berlin") == (MAR, None, None)
    assert [c[:3] for c in history(sem, "m-berlin")] == [
        ("created", "extracted", None),
        ("supersedes", "supersession", "m-london"),
    ]


def test_a_closed_fact_stated_again_later_is_current_again(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR)], None)
    sem.write_memories([mem("m-london", "User lives in London", MAY)], None)
    assert validity(sem, "m-london") == (MAY, None, None)
    assert validity(sem, "m-berlin") == (MAR, MAY, "m-london")
    assert history(sem, "m-london") == [
        ("created", "extracted", None, "User lives in London", JAN, None, None),
        ("superseded", "supersession", "m-berlin", "User lives in London", JAN, MAR, None),
        ("reopened", "extracted", None, "User lives in London", MAY, None, None),
        ("supersedes", "supersession", "m-berlin", "User lives in London", MAY, None, None),
    ]
    # stated again at an earlier time than it was closed: it stays closed
    sem.write_memories([mem("m-berlin", "User lives in Berlin", JAN, ("ep-3",))], None)
    assert validity(sem, "m-berlin") == (JAN, MAY, "m-london")
    assert history(sem, "m-berlin")[-1][:3] == ("restated", "extracted", None)


def test_a_fact_restated_at_the_moment_it_was_closed_reopens_and_keeps_what_it_had(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN, ("ep-1",), importance=0.9)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR)], None)
    sem.write_memories([mem("m-london", "User lives in London", MAR, ("ep-2",), importance=0.2)], None)
    london = stored(sem, "m-london")
    assert (london.valid_from, london.valid_until, london.superseded_by) == (MAR, None, None)
    assert (london.created_at, london.importance, london.source_episode_ids) == (JAN, 0.9, ["ep-1", "ep-2"])
    assert validity(sem, "m-berlin") == (MAR, MAR, "m-london")
    assert history(sem, "m-london")[2][:3] == ("reopened", "extracted", None)


def test_an_edit_replaces_text_history_timeline_and_slots(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-home", "User lives in London", JAN), mem("m-job", "User works at Acme", JAN)], None)
    old = stored(sem, "m-home")
    new = old.model_copy(update={"text": "User works at Globex", "valid_from": MAR})
    edited = sem.replace_memory(old, new, None)
    assert (edited.id, edited.text, edited.valid_until) == ("m-home", "User works at Globex", None)
    assert stored(sem, "m-home").text == "User works at Globex"
    assert validity(sem, "m-job") == (JAN, MAR, "m-home")  # the edited fact now supersedes the old job
    assert history(sem, "m-home") == [
        ("created", "extracted", None, "User lives in London", JAN, None, None),
        ("edited", "user", None, "User works at Globex", MAR, None, None),
        ("supersedes", "supersession", "m-job", "User works at Globex", MAR, None, None),
    ]
    assert sem.history.slot_ids("alice", ["user|lives-in"]) == []
    assert sem.history.slot_ids("alice", ["user|works-at"]) == ["m-home", "m-job"]
    assert sem.history.page("alice", 0, 10) == (["m-home", "m-job"], 2)
    assert [h.id for h in sem.search("memory", "alice", "Globex", 5, "bm25").results] == ["m-home"]
    assert sem.search("memory", "alice", "London", 5, "bm25").results == []
    lint = sem.replace_memory(stored(sem, "m-job"), stored(sem, "m-job"), None, origin="lint")
    assert lint.superseded_by == "m-home"
    assert history(sem, "m-job")[-1][:2] == ("edited", "lint")


def test_deleting_the_newer_fact_reopens_the_one_it_closed(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN), mem("m-job", "User works at Acme", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR)], None)
    assert sem.delete_memory("alice", "m-missing") is False
    assert sem.delete_memory("bob", "m-berlin") is False
    assert sem.delete("memory", "alice", "m-berlin") is True
    assert sem.records("memory", "alice", ["m-berlin"]) == {}
    assert sem.history.history("alice", "m-berlin") == []
    assert validity(sem, "m-london") == (JAN, None, None)
    assert validity(sem, "m-job") == (JAN, None, None)
    assert history(sem, "m-london") == [
        ("created", "extracted", None, "User lives in London", JAN, None, None),
        ("superseded", "supersession", "m-berlin", "User lives in London", JAN, MAR, None),
        ("reopened", "user", "m-berlin", "User lives in London", JAN, None, None),
    ]
    assert [c[0] for c in history(sem, "m-job")] == ["created"]
    assert sem.history.slot_ids("alice", ["user|lives-in"]) == ["m-london"]
    assert sem.history.page("alice", 0, 10) == (["m-london", "m-job"], 2)  # equal times: reverse id order
    assert sem.search("memory", "alice", "Berlin", 5, "bm25").results == []
    assert sem.delete("memory", "alice", "m-berlin") is False


def test_deleting_reopens_only_what_the_deleted_fact_closed(sem: SemanticMemory) -> None:
    """London was closed by Berlin, Berlin by Paris: deleting Paris reopens Berlin, not London."""
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR)], None)
    sem.write_memories([mem("m-paris", "User lives in Paris", MAY)], None)
    assert validity(sem, "m-berlin") == (MAR, MAY, "m-paris")
    assert sem.delete_memory("alice", "m-paris", origin="lint") is True
    assert validity(sem, "m-berlin") == (MAR, None, None)
    assert validity(sem, "m-london") == (JAN, MAR, "m-berlin")
    assert history(sem, "m-berlin")[-1][:3] == ("reopened", "lint", "m-paris")
    assert [c[0] for c in history(sem, "m-london")] == ["created", "superseded"]


def test_an_edit_with_a_vector_is_found_by_vector_search(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-home", "User lives in London", JAN)], None)  # no vector (embedder down)
    assert sem.search("memory", "alice", "User works at Globex", 5, "vector").results == []
    old = stored(sem, "m-home")
    new = old.model_copy(update={"text": "User works at Globex"})
    sem.replace_memory(old, new, sem.embedder.embed_one(new.text))
    found = sem.search("memory", "alice", "User works at Globex", 5, "vector").results
    assert [h.id for h in found] == ["m-home"] and found[0].score > 0.99


def test_deleting_a_memory_whose_record_is_already_gone_cleans_its_index_entries(
    sem: SemanticMemory, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """A record lost on its own (its index entries left behind) still deletes: True, nothing raised."""
    sem.write_memories([mem("m-cat", "User owns a grey cat", JAN)], None)
    assert raw_redis.delete(f"{key_prefix}:u:{{alice}}:memory:m-cat") == 1
    assert sem.delete_memory("alice", "m-cat") is True
    assert sem.search("memory", "alice", "grey cat", 5, "bm25").results == []
    assert sem.history.history("alice", "m-cat") == []
    assert sem.delete_memory("alice", "m-cat") is False


def test_deleting_an_episode_or_other_record_answers_whether_there_was_one(sem: SemanticMemory) -> None:
    sem.store_batch(
        [Episode(id="ep-1", user_id="alice", summary="We planned the Lisbon trip", timestamp=JAN)], [], None
    )
    assert sem.delete("episode", "alice", "ep-missing") is False
    assert sem.delete("episode", "bob", "ep-1") is False
    assert sem.delete("episode", "alice", "ep-1") is True
    assert sem.search("episode", "alice", "Lisbon trip", 5, "bm25").results == []
    assert sem.delete("episode", "alice", "ep-1") is False
    assert sem.delete("conclusion", "alice", "c-missing") is False  # any other namespace: False when absent


def test_merging_a_duplicate_folds_it_into_the_survivor_and_repoints_what_it_closed(sem: SemanticMemory) -> None:
    """The duplicate closed London; after the merge the survivor has closed it. The survivor keeps its
    text, id and time, gains the duplicate's sources and the higher importance; the duplicate leaves
    the record store, the timeline, the slot index and the search indexes; both histories say so."""
    sem.write_memories([mem("m-dup", "User lives in Berlin", JAN, user="bob")], None)  # another user's copy
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-dup", "User lives in Berlin", MAR, ("ep-1", "ep-2"), importance=0.9)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAY, ("ep-3", "ep-1"), importance=0.4)], None)
    assert validity(sem, "m-london") == (JAN, MAR, "m-dup")

    merged = sem.merge_duplicate(stored(sem, "m-berlin"), stored(sem, "m-dup"))
    assert merged == mem("m-berlin", "User lives in Berlin", MAY, ("ep-3", "ep-1", "ep-2"), importance=0.9)
    assert stored(sem, "m-berlin") == merged
    assert sem.records("memory", "alice", ["m-dup"]) == {}
    assert validity(sem, "m-london") == (JAN, MAR, "m-berlin")
    assert history(sem, "m-berlin")[-1] == ("merged", "lint", "m-dup", "User lives in Berlin", MAY, None, None)
    assert [c[:4] for c in history(sem, "m-dup")] == [("merged", "lint", "m-berlin", None)]
    assert sorted(sem.history.slot_ids("alice", ["user|lives-in"])) == ["m-berlin", "m-london"]
    assert sem.history.page("alice", 0, 10) == (["m-berlin", "m-london"], 2)
    assert [h.id for h in sem.search("memory", "alice", "Berlin", 5, "bm25").results] == ["m-berlin"]
    assert validity(sem, "m-dup", user="bob") == (JAN, None, None)
    assert [c[0] for c in history(sem, "m-dup", user="bob")] == ["created"]
    # the facade passes any other origin on
    sem.write_memories([mem("m-tea", "User drinks green tea", JAN), mem("m-tea-2", "User drinks green tea", MAR)], None)
    sem.merge_duplicate(stored(sem, "m-tea"), stored(sem, "m-tea-2"), origin="user")
    assert [c[:4] for c in history(sem, "m-tea-2")] == [("merged", "user", "m-tea", None)]


def test_the_versions_store_has_the_documented_origin_of_each_change(sem: SemanticMemory) -> None:
    """Called without an origin, MemoryVersions records a write as extracted, an edit and a delete as the
    user's, a merge as the lint's (the same defaults as the SemanticMemory facade)."""
    versions = sem.versions
    versions.write([mem("m-cat", "User owns a grey cat", JAN), mem("m-cat-2", "User owns a grey cat", MAR)], None)
    versions.write([mem("m-tea", "User drinks green tea", JAN), mem("m-acme", "User works at Acme", JAN)], None)
    versions.write([mem("m-globex", "User works at Globex", MAR)], None)  # closes m-acme
    versions.replace(stored(sem, "m-tea"), mem("m-tea", "User drinks black tea", JAN), None)
    versions.merge_duplicate(stored(sem, "m-cat"), stored(sem, "m-cat-2"))
    versions.delete("alice", "m-globex")  # reopens m-acme
    assert [c[:2] for c in history(sem, "m-cat")] == [("created", "extracted"), ("merged", "lint")]
    assert [c[:2] for c in history(sem, "m-tea")] == [("created", "extracted"), ("edited", "user")]
    assert [c[:4] for c in history(sem, "m-cat-2")] == [("merged", "lint", "m-cat", None)]
    assert [c[:3] for c in history(sem, "m-acme")][-1] == ("reopened", "user", "m-globex")


def test_a_request_waits_a_remote_embedder_its_own_bound_and_queries_the_query_bound(sem: SemanticMemory) -> None:
    """``embed_within``/``embed_or_none(wait_s)`` bound a remote embedder by the request's wait (0.3 s),
    several queries at once by the query bound (0.5 s), not by the batch timeout (8 s); the vectors are
    the service's, to unit length (458d130, 6d413c6)."""
    server = HangableEmbedServer()
    embedder = OllamaEmbedder("in-house", server.url, timeout_s=8.0, query_timeout_s=0.5, breaker_failures=100)
    remote = SemanticMemory(sem.connector, sem.keys, sem.episodes, lambda: embedder)
    try:
        texts = ["grey cat", "night train to Lyon"]
        counts = np.array([hash_embedding(t) for t in texts])
        expected = counts / np.linalg.norm(counts, axis=1, keepdims=True)  # unit vectors
        assert np.allclose(remote.embed_within(texts, 0.3), expected)
        assert np.allclose(remote.embed_or_none(texts, 0.3), expected)  # type: ignore[arg-type]
        assert np.allclose(np.array(remote._embed_queries(texts)), expected)
        asked = server.requests
        for _ in range(2):  # one query: embed_one's cache, one request
            assert np.allclose(np.array(remote._embed_queries(texts[1:])), expected[1:])
        assert server.requests == asked + 1
        written: list[np.ndarray | None] = []
        pending = PendingVectors(sem.connector, sem.keys)

        def storing(record_id: str) -> Callable[[np.ndarray | None], None]:
            """A write that stores the record, as every writer does (only a stored record is noted)."""
            key = sem.keys.user("alice").record("memory", record_id)

            def write(vectors: np.ndarray | None) -> None:
                sem.connector.run(lambda r: r.set(key, "{}"))
                written.append(vectors)

            return write

        remote.embed_then_write("memory", [("alice", "m-cat")], texts[:1], storing("m-cat"))
        assert written[0] is not None and np.allclose(written[0], expected[:1])
        assert pending.oldest("alice", 10) == []  # written with its vector: nothing waits
        server.hang()
        started = time.monotonic()
        remote.embed_then_write("memory", [("alice", "m-bees")], ["bees"], storing("m-bees"), 0.3)
        assert time.monotonic() - started < 0.3 + 2.0  # the request's wait, not the batch timeout (8 s)
        assert written[1] is None and [p.record_id for p in pending.oldest("alice", 10)] == ["m-bees"]
        for call, wait_s in (
            (lambda: remote.embed_within(["bees"], 0.3), 0.3),
            (lambda: remote._embed_queries(["bees", "honey bees"]), 0.5),
        ):
            started = time.monotonic()
            with pytest.raises(EmbeddingTimeout):
                call()
            assert wait_s <= time.monotonic() - started < wait_s + 2.0
        started = time.monotonic()
        assert remote.embed_or_none(["bees"], 0.3) is None
        assert time.monotonic() - started < 0.3 + 2.0
    finally:
        server.answer()
        server.close()
        embedder.close()
