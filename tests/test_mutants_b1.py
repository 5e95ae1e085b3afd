"""Mutants of the memory writers' lock (issue 20, b1): MemoryVersions' drop_episode, merge_duplicate,
restate and replace re-read what is stored under the user's lock and act on that, so each is checked
here with the stored memory changed between the caller's read and the call (sequentially: no race
needed), and an episode's forget with the cases the session-end tests do not reach (a fact it had
closed, a memory of stopwords only, the count it returns). Real Redis and the bundled embedder;
expected values are literals (ids, texts, times, the documented history actions)."""

from __future__ import annotations

import numpy as np
import pytest

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.semantic import SemanticMemory
from agtos.schemas import Memory

JAN = 1_704_700_800_000  # 2024-01-08 08:00 UTC
MAR = 1_710_489_600_000  # 2024-03-15 08:00 UTC


def mem(memory_id: str, text: str, at: int, sources: tuple[str, ...] = ()) -> Memory:
    return Memory(
        id=memory_id, user_id="alice", text=text, valid_from=at, created_at=at, source_episode_ids=list(sources)
    )


@pytest.fixture
def sem(coordinator: MemoryCoordinator) -> SemanticMemory:
    return coordinator.semantic


def stored(sem: SemanticMemory, memory_id: str) -> Memory:
    return Memory.model_validate_json(sem.records("memory", "alice", [memory_id])[memory_id])


def actions(sem: SemanticMemory, memory_id: str) -> list[tuple[str, str, str | None]]:
    return [(c.action, c.origin, c.related_id) for c in sem.history.history("alice", memory_id)]


def test_forgetting_an_episode_reopens_the_fact_its_memory_closed_and_counts_the_deleted(sem: SemanticMemory) -> None:
    """Berlin (said only in ep-2) closed London; forgetting ep-2 deletes Berlin, reopens London as the
    user's change, keeps the cat (also said in ep-1) without ep-2, and answers 1 (deleted)."""
    sem.write_memories([mem("m-london", "User lives in London", JAN, ("ep-1",))], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR, ("ep-2",))], None)
    sem.write_memories([mem("m-cat", "User owns a grey cat", JAN, ("ep-1", "ep-2"))], None)
    assert stored(sem, "m-london").superseded_by == "m-berlin"
    assert sem.versions.drop_episode("alice", "ep-2") == 1
    assert sem.records("memory", "alice", ["m-berlin"]) == {}
    london = stored(sem, "m-london")
    assert (london.valid_until, london.superseded_by) == (None, None)
    assert actions(sem, "m-london")[-1] == ("reopened", "user", "m-berlin")
    assert stored(sem, "m-cat").source_episode_ids == ["ep-1"]


def test_forgetting_an_episode_deletes_its_memory_of_stopwords_only(sem: SemanticMemory) -> None:
    """'It is what it is' has no BM25 term (not in the BM25 index) but is on the timeline: it is found
    and deleted with its only episode."""
    sem.write_memories([mem("m-shrug", "It is what it is", JAN, ("ep-9",))], None)
    assert list(sem.store("memory").bm25.ids("alice")) == []
    assert sem.versions.drop_episode("alice", "ep-9") == 1
    assert sem.records("memory", "alice", ["m-shrug"]) == {}


def test_a_merge_of_a_pair_changed_since_it_was_read_does_nothing(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-cat", "User owns a grey cat", JAN, ("ep-1",))], None)
    sem.write_memories([mem("m-cat-2", "User owns a grey cat", MAR, ("ep-2",))], None)
    survivor, duplicate = stored(sem, "m-cat"), stored(sem, "m-cat-2")
    sem.replace_memory(survivor, survivor.model_copy(update={"importance": 0.9}), None)  # edited meanwhile
    assert sem.merge_duplicate(survivor, duplicate) is None
    assert stored(sem, "m-cat-2").source_episode_ids == ["ep-2"]  # still stored, not merged
    assert [a for a, _, _ in actions(sem, "m-cat")] == ["created", "edited"]
    merged = sem.merge_duplicate(stored(sem, "m-cat"), duplicate)
    assert merged is not None and merged.source_episode_ids == ["ep-1", "ep-2"]


def test_a_restatement_of_a_memory_closed_or_deleted_since_it_was_found_writes_nothing(sem: SemanticMemory) -> None:
    sem.write_memories([mem("m-london", "User lives in London", JAN, ("ep-1",))], None)
    found = stored(sem, "m-london")
    restated = sem.versions.restate(found, ["chat-7"], "user lives in LONDON")
    assert restated is not None and restated.source_episode_ids == ["ep-1", "chat-7"]
    said = [(c.action, c.origin, c.text) for c in sem.history.history("alice", "m-london")]
    assert said[-1] == ("merged", "user", "user lives in LONDON")  # the words as said again
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR, ("ep-2",))], None)  # closes London
    assert sem.versions.restate(found, ["chat-8"], "User lives in London") is None
    assert stored(sem, "m-london").source_episode_ids == ["ep-1", "chat-7"]
    assert sem.delete_memory("alice", "m-london") is True
    assert sem.versions.restate(found, ["chat-9"], "User lives in London") is None
    assert sem.records("memory", "alice", ["m-london"]) == {}


def test_an_edit_keeping_words_another_edit_changed_keeps_that_edits_vector(sem: SemanticMemory) -> None:
    """PUT A reads the tea memory and changes its importance; PUT B changes its words first. A's write
    keeps B's words and B's vector (not the vector A sent, of the old words)."""
    old_text, new_text = "User drinks green tea", "User drinks black coffee"
    old_vec, new_vec = sem.embed_within([old_text, new_text], 30.0)
    sem.write_memories([mem("m-tea", old_text, JAN)], np.array([old_vec]))
    read = stored(sem, "m-tea")
    sem.replace_memory(read, read.model_copy(update={"text": new_text}), new_vec)
    edited = sem.replace_memory(read, read.model_copy(update={"importance": 0.9}), old_vec)
    assert edited is not None and (edited.text, edited.importance) == (new_text, 0.9)
    kept = sem.store("memory").vectors.vectors("alice", ["m-tea"])["m-tea"]
    assert float(np.dot(kept, new_vec)) > 0.99 > float(np.dot(kept, old_vec))


def test_deleting_the_fact_that_closed_another_clears_the_closing_offset(sem: SemanticMemory) -> None:
    """Berlin, said at UTC+2, closed London (until MAR at +120 minutes); deleting Berlin reopens London
    with no end and no end offset."""
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR).model_copy(update={"utc_offset": 120})], None)
    closed = stored(sem, "m-london")
    assert (closed.valid_until, closed.until_utc_offset, closed.superseded_by) == (MAR, 120, "m-berlin")
    assert sem.delete_memory("alice", "m-berlin") is True
    london = stored(sem, "m-london")
    assert (london.valid_until, london.until_utc_offset, london.superseded_by) == (None, None, None)


def test_a_memory_stated_again_keeps_the_offset_of_its_first_statement(sem: SemanticMemory) -> None:
    """Said at UTC+1 in January and at UTC-5 in March: it is from January at +60 minutes, in either
    order of learning."""
    tea = mem("m-tea", "User drinks green tea", JAN, ("ep-1",)).model_copy(update={"utc_offset": 60})
    later = mem("m-tea", "User drinks green tea", MAR, ("ep-2",)).model_copy(update={"utc_offset": -300})
    sem.write_memories([tea], None)
    sem.write_memories([later], None)
    assert (stored(sem, "m-tea").valid_from, stored(sem, "m-tea").utc_offset) == (JAN, 60)
    sem.write_memories([later.model_copy(update={"id": "m-tea-2"})], None)
    sem.write_memories([tea.model_copy(update={"id": "m-tea-2"})], None)
    assert (stored(sem, "m-tea-2").valid_from, stored(sem, "m-tea-2").utc_offset) == (JAN, 60)
    sem.write_memories([tea.model_copy(update={"id": "m-tea-3"})], None)  # the same moment: the first kept
    sem.write_memories([tea.model_copy(update={"id": "m-tea-3", "utc_offset": -300})], None)
    assert stored(sem, "m-tea-3").utc_offset == 60


def test_a_closed_fact_stated_again_keeps_its_end_offset_and_reopened_takes_the_new_one(sem: SemanticMemory) -> None:
    """London (JAN) closed by Berlin said at UTC+2 (MAR, +120); London said again in JAN stays closed
    with its end offset; said again in MAY at UTC-5 it is reopened from MAY at -300 with no end offset."""
    sem.write_memories([mem("m-london", "User lives in London", JAN, ("ep-1",))], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR).model_copy(update={"utc_offset": 120})], None)
    sem.write_memories([mem("m-london", "User lives in London", JAN, ("ep-3",))], None)
    london = stored(sem, "m-london")
    assert (london.valid_until, london.until_utc_offset, london.superseded_by) == (MAR, 120, "m-berlin")
    may = 1_715_760_000_000  # 2024-05-15 08:00 UTC
    again = mem("m-london", "User lives in London", may, ("ep-4",)).model_copy(update={"utc_offset": -300})
    sem.write_memories([again], None)
    london = stored(sem, "m-london")
    assert (london.valid_from, london.utc_offset) == (may, -300)
    assert (london.valid_until, london.until_utc_offset, london.superseded_by) == (None, None, None)
