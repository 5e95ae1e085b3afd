"""What kills the survivors of the complete mutation run of ``memory/semantic.py`` and
``memory/memory_versions.py`` (issue 20, helper m4; docs/testing.md). Literals from the docstrings and
README promises, real Redis where a store is involved."""

from __future__ import annotations

import pytest

from agtos.memory.memory_versions import statement_rounds
from agtos.memory.semantic import SemanticMemory
from agtos.schemas import Memory
from tests.test_core_semantic_memory import JAN, MAR, MAY, history, mem, sem, stored, validity

__all__ = ["sem"]  # the fixture, shared with test_core_semantic_memory


def said(memory_id: str, episode: str, user: str = "u") -> Memory:
    return Memory(id=memory_id, user_id=user, text=f"fact {memory_id}", source_episode_ids=[episode])


def test_a_round_ends_before_a_session_repeating_any_memory_of_the_round_not_only_of_its_last_session() -> None:
    """statement_rounds (mutmut 23: ``seen = said``, only the last session's memories remembered): A says m1,
    B says m2, C says m1 again: C repeats what the round [A, B] said, so C starts a new round."""
    assert statement_rounds([said("m1", "A"), said("m2", "B"), said("m1", "C")]) == [[0, 1], [2]]
    assert statement_rounds([said("m1", "A"), said("m2", "B"), said("m3", "C"), said("m1", "D")]) == [[0, 1, 2], [3]]
    # the same id of another user is another memory
    assert statement_rounds([said("m1", "A"), said("m2", "B"), said("m1", "C", user="v")]) == [[0, 1, 2]]


def test_a_sessions_rows_are_grouped_by_their_first_source_alone() -> None:
    """statement_rounds (mutmut 9: grouped by the first two sources): two rows of session A, the second with
    another later source, are what A said: one round, although they state m1 twice."""
    first = Memory(id="m1", user_id="u", text="fact m1", source_episode_ids=["A", "X"])
    again = Memory(id="m1", user_id="u", text="fact m1", source_episode_ids=["A", "Y"])
    assert statement_rounds([first, again]) == [[0, 1]]


def test_deleting_the_fact_that_closed_another_clears_the_offset_of_its_end(sem: SemanticMemory) -> None:
    """MemoryVersions.delete (mutmut 46/47: ``until_utc_offset`` left on the reopened fact): London closed by
    Berlin, said at UTC+1 (60 minutes), carries Berlin's offset as the local day of its end; deleting Berlin
    makes London current again with no end, so no offset of an end either (README: a current fact has
    ``valid_until`` null)."""
    sem.write_memories([mem("m-london", "User lives in London", JAN)], None)
    sem.write_memories([mem("m-berlin", "User lives in Berlin", MAR).model_copy(update={"utc_offset": 60})], None)
    closed = stored(sem, "m-london")
    assert (closed.valid_until, closed.until_utc_offset, closed.superseded_by) == (MAR, 60, "m-berlin")
    assert sem.delete_memory("alice", "m-berlin") is True
    reopened = stored(sem, "m-london")
    assert (reopened.valid_until, reopened.until_utc_offset, reopened.superseded_by) == (None, None, None)


@pytest.mark.parametrize("with_vectors", [False, True])
def test_a_fact_said_again_by_a_later_session_of_one_batch_is_written_as_separate_batches_would(
    sem: SemanticMemory, with_vectors: bool
) -> None:
    """MemoryVersions.write (mutmut 6: two rounds written as one batch; 21: each round's vectors dropped, or
    None indexed): sessions A (London, January), B (Berlin, March), C (London again, May) in one batch are two
    rounds, [A, B] then [C]: Berlin closes London in March, C reopens London in May, which closes Berlin
    (docstring: "written in rounds, as separate batches would write it"). Two memories written."""
    batch = [
        mem("m-london", "User lives in London", JAN, ("ep-a",)),
        mem("m-berlin", "User lives in Berlin", MAR, ("ep-b",)),
        mem("m-london", "User lives in London", MAY, ("ep-c",)),
    ]
    vectors = sem.embedder.embed([m.text for m in batch]) if with_vectors else None
    assert sem.write_memories(batch, vectors) == 2
    assert validity(sem, "m-london") == (MAY, None, None)
    assert validity(sem, "m-berlin") == (MAR, MAY, "m-london")
    assert [c[0] for c in history(sem, "m-london")] == ["created", "superseded", "reopened", "supersedes"]
    assert stored(sem, "m-london").source_episode_ids == ["ep-a", "ep-c"]
    found = sem.search("memory", "alice", "User lives in Berlin", 1, "vector").results
    assert [(h.id, h.score > 0.99) for h in found] == ([("m-berlin", True)] if with_vectors else [])
