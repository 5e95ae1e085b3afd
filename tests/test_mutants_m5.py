"""What kills the survivors of the complete mutation run of ``memory/semantic.py`` (issue 20, helper m5;
docs/testing.md). Literals from the docstrings and the README, a real Redis and the bundled model."""

from __future__ import annotations

import json

import numpy as np

from agtos.memory.semantic import SemanticMemory
from agtos.schemas import Episode, Role, Turn
from agtos.schemas.records import StoredTurn
from agtos.tasks.verbatim_turns import stored_turns, turn_units
from tests.test_core_semantic_memory import JAN, sem

__all__ = ["sem"]  # the fixture, shared with test_core_semantic_memory


class ClosableEmbedder:
    """A stand-in embedder that counts how often it was built and closed (``close`` releases a model)."""

    name = "closable"
    model = "counting"

    def __init__(self) -> None:
        self.closed = 0

    @property
    def dim(self) -> int:
        return 8

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.eye(8, dtype=np.float32)[[len(t) % 8 for t in texts]]

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def close(self) -> None:
        self.closed += 1


def test_deleting_an_episode_known_only_by_its_one_turn_says_there_was_one(sem: SemanticMemory) -> None:
    """SemanticMemory.delete (mutmut 23: ``delete_episode(...) > 0`` -> ``> 1``): an episode whose record and
    index entries are gone but whose one verbatim turn is still stored is still there to delete: True (the
    turn is removed), then False. The bug answers False (a forget saying "not found") for a one-turn session."""
    turn = StoredTurn(
        user_id="alice", episode_id="ep-1", position=0, role=Role.user, content="Lisbon in May", timestamp=JAN
    )
    assert sem.turns.save([turn], [], None) == 1
    assert sem.delete("episode", "alice", "ep-1") is True
    assert sem.turns.episode_turns("alice", "ep-1") == []
    assert sem.delete("episode", "alice", "ep-1") is False


def test_the_bundled_model_embeds_a_requests_texts_within_its_wait(sem: SemanticMemory) -> None:
    """SemanticMemory.embed_within (mutmut 6: the bundled model asked for ``None`` instead of the texts): with
    a model that has no service to wait on, ``embed_within`` gives the texts' vectors, one 384-dimensional unit
    row per text (README: all-MiniLM-L6-v2), the same as the model's own ``embed``."""
    texts = ["grey cat", "night train to Lyon"]
    got = sem.embed_within(texts, 0.3)
    assert got.shape == (2, 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert np.allclose(got, sem.embedder.embed(texts), atol=1e-6)
    assert np.allclose(sem.embed_or_none(texts, 0.3), got)  # type: ignore[arg-type]


def test_releasing_the_embedder_closes_the_one_built_and_builds_none(sem: SemanticMemory) -> None:
    """SemanticMemory.release_embedder (mutmut 1, 2, 7, 8, 9: ``close`` never looked up or never called): a
    service closing releases its embedding model (services.close docstring) so that a process building many
    services does not hold a model per closed one; releasing before any use builds no embedder."""
    built: list[ClosableEmbedder] = []

    def factory() -> ClosableEmbedder:
        built.append(ClosableEmbedder())
        return built[-1]

    semantic = SemanticMemory(sem.connector, sem.keys, sem.episodes, factory)
    semantic.release_embedder()
    assert built == []  # nothing built, nothing to close
    assert semantic.embedder.dim == 8
    semantic.release_embedder()
    assert [e.closed for e in built] == [1]


def test_prepare_syncs_the_mirrors_of_its_mode_and_says_which_mode(sem: SemanticMemory) -> None:
    """SemanticMemory.prepare (mutmut 1: ``wanted = None``, the mode dropped): a keyword search reads only the
    BM25 mirror, a vector search only the vector one, and without a mode the service's default (hybrid) both;
    the Prepared says which mode it was prepared for, which search_many checks before it uses it. The bug
    syncs both mirrors whatever the mode and prepares for no mode, so the search prepares again."""
    sem.store("memory").upsert("alice", "m1", "Gina adopted a grey cat", None, "{}")
    keyword = sem.prepare("alice", ["memory"], "bm25")
    assert keyword.mode == "bm25"
    assert keyword.synced["memory"].bm25 is not None and keyword.synced["memory"].vectors is None
    vector = sem.prepare("alice", ["memory"], "vector")
    assert vector.mode == "vector"
    assert vector.synced["memory"].bm25 is None and vector.synced["memory"].vectors is not None
    default = sem.prepare("alice", ["memory"])
    assert default.mode == "hybrid"
    assert default.synced["memory"].bm25 is not None and default.synced["memory"].vectors is not None


def test_only_the_episodes_of_the_turn_hits_returned_are_read_with_them(sem: SemanticMemory) -> None:
    """SemanticMemory.search_many (mutmut 125: the turn hits' page taken as every ranked candidate, not the
    first ``limit``): with ``turn_episodes`` the episode records read along are those of the turn hits'
    episodes (docstring), so with one turn hit asked for, one episode's record, not those of every
    candidate turn that matched. Two sessions each say "Lisbon" once."""
    for episode, text in (("ep-1", "we flew to Lisbon"), ("ep-2", "Lisbon again next spring, maybe by train")):
        turns = stored_turns("alice", episode, f"s-{episode}", [Turn(role=Role.user, content=text, timestamp=JAN)])
        sem.turns.save(turns, turn_units(turns), None)
        sem.store("episode").upsert("alice", episode, f"a chat, {episode}", None, json.dumps({"id": episode}))
    wide = sem.search_many("alice", "Lisbon", {"episode": 1, "turn": 2}, mode="bm25", turn_episodes=True)
    assert sorted(h.id for h in wide["turn"].results) == ["ep-1.t0", "ep-2.t0"]
    found = sem.search_many("alice", "Lisbon", {"episode": 1, "turn": 1}, mode="bm25", turn_episodes=True)
    (hit,) = found["turn"].results
    assert found["episode"].results == []  # no episode record says Lisbon
    episode = hit.id.split(".")[0]
    assert found["episode"].related == {episode: json.dumps({"id": episode})}


def test_a_batch_whose_episodes_are_saved_already_writes_only_their_index_entries(sem: SemanticMemory) -> None:
    """SemanticMemory.store_batch (mutmut 6 at 8236e2d: ``saved`` ignored, the records written again): with
    ``saved`` the episodes' records are written already (by the opt-out-checked atomic write) and only their
    index entries are written (docstring). The bug writes each record again in the index step, bringing back
    one that an opt-out or a forget removed in between; here the record is not there, and stays absent."""
    episode = Episode(id="ep-1", user_id="alice", summary="We planned the Lisbon trip", timestamp=JAN)
    sem.store_batch([episode], [], None, saved=True)
    assert sem.episodes.get("alice", "ep-1") is None
    assert list(sem.store("episode").bm25.ids("alice")) == ["ep-1"]
    sem.store_batch([episode], [], None)  # not saved: the record is written too
    assert sem.episodes.get("alice", "ep-1") == episode
