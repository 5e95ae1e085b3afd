"""What a Dreamer run embeds (issue 14, item 8: ingestion throughput): only the conclusions it found
new, not every conclusion of its 50-episode window again at each session end; the stored ones keep
the vector of their text."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_dreamer import HISTORY, play


def recording(coordinator: MemoryCoordinator, monkeypatch: Any) -> list[str]:
    """The texts every embedding call gets from now on (the real embedder still answers)."""
    embedder = coordinator.semantic.embedder
    seen: list[str] = []
    real = embedder.embed

    def embed(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return real(texts)

    monkeypatch.setattr(embedder, "embed", embed)
    return seen


def stored_vectors(coordinator: MemoryCoordinator, user_id: str) -> dict[str, np.ndarray]:
    ids = [c.id for c in coordinator.services.conclusions.all(user_id)]
    return coordinator.services.conclusions.index.vectors.vectors(user_id, ids)


def test_a_rerun_embeds_no_conclusion_it_already_stored(
    client: TestClient, coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    play(client)
    texts = {c.text for c in coordinator.services.conclusions.all("dora")}
    assert "User prefers metric units, always" in texts and len(texts) >= 4
    seen = recording(coordinator, monkeypatch)
    again = client.post("/api/memory/dream", headers=user("dora")).json()
    assert again["source"] == "rules" and len(again["conclusions"]) == len(texts)
    assert seen == []  # before: every conclusion of the window was embedded again
    vectors = stored_vectors(coordinator, "dora")
    assert set(vectors) == {c.id for c in coordinator.services.conclusions.all("dora")}
    for conclusion in coordinator.services.conclusions.all("dora"):  # each still its own text's vector
        expected = coordinator.semantic.embedder.embed([conclusion.text])[0]
        assert float(np.dot(vectors[conclusion.id], expected)) > 0.999


def test_a_session_end_embeds_only_the_new_conclusions(
    client: TestClient, coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    play(client)
    before = {c.text for c in coordinator.services.conclusions.all("dora")}
    seen = recording(coordinator, monkeypatch)
    stamp = HISTORY[-1][1] + 86_400_000
    said = ["I'm allergic to peanuts.", "Noted, no peanuts.", "I prefer trains over planes.", "Noted."]
    body = {
        "turns": [
            {"role": r, "content": c, "timestamp": stamp + i}
            for i, (r, c) in enumerate(zip(["user", "assistant"] * 2, said, strict=True))
        ]
    }
    assert client.post("/api/memory/sessions/thu/turns", json=body, headers=user("dora")).status_code == 200
    assert client.post("/api/memory/sessions/thu/end", headers=user("dora")).json()["saved"] is True
    after = {c.text for c in coordinator.services.conclusions.all("dora")}
    new = after - before
    assert new and "User is allergic to peanuts" in " ".join(new)
    assert new <= set(seen)
    assert before & set(seen) == set()  # the window's older conclusions were not embedded again


def test_a_conclusion_stored_without_its_vector_gets_it_on_the_next_run(
    client: TestClient, coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    play(client)
    conclusion = next(c for c in coordinator.services.conclusions.all("dora") if c.text.startswith("User prefers"))
    coordinator.services.conclusions.index.vectors.remove("dora", conclusion.id)  # as if the embedder was down
    seen = recording(coordinator, monkeypatch)
    client.post("/api/memory/dream", headers=user("dora"))
    assert seen == [conclusion.text]
    assert conclusion.id in stored_vectors(coordinator, "dora")


def test_an_episodes_explicit_statements_are_read_once(monkeypatch: Any) -> None:
    """The Dreamer reads the turns of the user's last 50 episodes at every session end: an
    episode's statements are computed once, again only when a field they are read from changes."""
    import agtos.tasks.explicit as explicit
    from agtos.schemas import StoredTurn

    calls: list[str] = []
    real = explicit.statements_of

    def counted(sentence: str, who: str) -> list[tuple[str, str, float]]:
        calls.append(sentence)
        return real(sentence, who)

    monkeypatch.setattr(explicit, "statements_of", counted)
    monkeypatch.setattr(explicit, "_CACHE", OrderedDict(), raising=False)  # empty: no earlier test's

    def turns(allergy: str) -> list[StoredTurn]:
        said = [("user", f"I'm allergic to {allergy}."), ("assistant", "Noted."), ("user", "I live in Porto.")]
        return [
            StoredTurn(user_id="u", episode_id="ep-1", position=i, role=r, content=c, timestamp=1_000 + i)
            for i, (r, c) in enumerate(said)
        ]

    first = explicit.turn_statements(turns("peanuts"))
    assert [s.text for s in first] == ["User is allergic to peanuts", "User lives in Porto"]
    assert len(calls) == 2  # the user's two sentences
    assert explicit.turn_statements(turns("peanuts")) == first and len(calls) == 2  # before: 4
    changed = explicit.turn_statements(turns("shellfish"))
    assert [s.text for s in changed] == ["User is allergic to shellfish", "User lives in Porto"] and len(calls) == 4
