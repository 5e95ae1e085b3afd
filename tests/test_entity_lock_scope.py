"""An entity's rename embeds its new name before it takes the process's entity lock (issue 15): while the
embedder is slow on that name, the other entity writers of the process (another user's edit or memory, the
same user's delete or merge) are not held up, and the rename still ends consistent with what they did.

The embedder is the bundled model behind a gate: a call embedding ``NEW_NAME`` says it started and waits
until the test opens the gate. Each other writer must answer while that call is still waiting; before the
fix the rename held the process's lock through the call, so each waited for the gate (``BOUND_S``, then
the test fails). Real Redis, the bundled embedder and NER model, through HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embeddings import Embedder
from agtos.serving.app import create_app
from tests.helpers import user
from tests.test_pending_vectors import SwitchableEmbedder

A, B = "lock-ann", "lock-bea"
NEW_NAME = "Acme Corporation"  # the name whose embedding is slow
BOUND_S = 20.0  # how long another writer may take while the rename's embedding waits (ms when not held up)
GATE_S = 60.0  # the gate opens by itself after this: a failing test ends


class GatedEmbedder(SwitchableEmbedder):
    """The real embedder; a call embedding ``NEW_NAME`` sets ``started`` and waits for ``opened``."""

    def __init__(self, real: Embedder) -> None:
        super().__init__(real)
        self.started, self.opened = threading.Event(), threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if NEW_NAME in texts:
            self.started.set()
            self.opened.wait(GATE_S)
        return super().embed(texts)


@pytest.fixture
def api(coordinator: MemoryCoordinator) -> Iterator[tuple[TestClient, MemoryCoordinator, GatedEmbedder]]:
    semantic = coordinator.services.semantic
    gated = GatedEmbedder(semantic.embedder)  # the bundled model, loaded now
    semantic._embedder = gated
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client, coordinator, gated
    gated.opened.set()


def remember(client: TestClient, who: str, text: str) -> None:
    response = client.post("/api/memory/memories", json={"text": text}, headers=user(who))
    assert response.status_code in (200, 201), response.text


def entities(client: TestClient, who: str) -> dict[str, dict[str, Any]]:
    response = client.get("/api/entities", params={"limit": 100}, headers=user(who))
    assert response.status_code == 200, response.text
    return {e["name"]: e for e in response.json()["entities"]}


def while_renaming(
    client: TestClient, gated: GatedEmbedder, entity_id: str, others: list[Callable[[], Any]]
) -> tuple[int, list[Any]]:
    """Rename ``entity_id`` (user A) to ``NEW_NAME``; while its embedding waits at the gate, run each of
    ``others`` in turn, each answering within ``BOUND_S`` with the gate still shut. Returns the rename's
    status and what the others returned."""
    path = f"/api/entities/{entity_id}"
    with ThreadPoolExecutor(2) as pool:
        rename: Future[int] = pool.submit(
            lambda: client.put(path, json={"name": NEW_NAME}, headers=user(A)).status_code
        )
        try:
            assert gated.started.wait(BOUND_S), "the rename never embedded its new name"
            answers = []
            for other in others:
                answer = pool.submit(other)
                try:
                    answers.append(answer.result(BOUND_S))
                except TimeoutError:
                    pytest.fail(f"another entity writer waited for the rename's embedding ({other.__doc__})")
                assert not rename.done() and not gated.opened.is_set()  # it answered while the rename embedded
        finally:
            gated.opened.set()
        return rename.result(GATE_S), answers


def test_other_writers_of_the_process_answer_while_a_rename_embeds_its_name(
    api: tuple[TestClient, MemoryCoordinator, GatedEmbedder],
) -> None:
    """Bea's entity edit, Bea's new memory (its entities fed to the graph) and Ann's delete of her other
    entity all answer while Ann's rename of Acme Corp waits for its embedding; the rename then lands,
    with its new name's vector."""
    client, coordinator, gated = api
    remember(client, A, "Alice signed the contract with Acme Corp in Berlin.")
    remember(client, B, "Initech is our new vendor.")
    ann, bea = entities(client, A), entities(client, B)
    acme, berlin, initech = ann["Acme Corp"]["id"], ann["Berlin"]["id"], bea["Initech"]["id"]

    def edit_bea() -> int:
        """Bea's PUT"""
        body = {"name": "Initech Ltd", "confidence": 0.9}
        return client.put(f"/api/entities/{initech}", json=body, headers=user(B)).status_code

    def remember_bea() -> int:
        """Bea's POST /api/memory/memories"""
        body = {"text": "Bob met Carol in Porto."}
        return client.post("/api/memory/memories", json=body, headers=user(B)).status_code

    def delete_ann() -> int:
        """Ann's DELETE of another entity"""
        return client.delete(f"/api/entities/{berlin}", headers=user(A)).status_code

    status, answers = while_renaming(client, gated, acme, [edit_bea, remember_bea, delete_ann])
    assert status == 200 and answers[0] == 200 and answers[1] in (200, 201) and answers[2] == 200
    ann, bea = entities(client, A), entities(client, B)
    assert ann[NEW_NAME]["id"] == acme and ann[NEW_NAME]["aliases"] == ["Acme Corp"] and "Berlin" not in ann
    assert bea["Initech Ltd"]["id"] == initech and {"Carol", "Porto"} <= set(bea)
    index = coordinator.entities.vector_index()
    assert index is not None
    stored = index.vectors(A, [acme])[acme]
    expected = gated.real.embed([NEW_NAME])[0]
    assert float(np.dot(stored, expected)) == pytest.approx(1.0, abs=1e-3)  # the new name's, not the old one's
    calls = len(gated.sizes)
    kept = client.put(f"/api/entities/{acme}", json={"name": NEW_NAME, "confidence": 0.8}, headers=user(A))
    assert kept.status_code == 200 and kept.json()["entity"]["confidence"] == 0.8
    assert len(gated.sizes) == calls  # the name it keeps is not embedded again


def test_an_entity_merged_away_while_its_rename_embeds_stays_merged(
    api: tuple[TestClient, MemoryCoordinator, GatedEmbedder],
) -> None:
    """Acme Corp is merged into Initech while its rename waits for the embedding: the merge answers at
    once, the rename then finds no Acme (404) and writes neither a name nor a vector for it."""
    client, coordinator, gated = api
    remember(client, A, "Alice signed the contract with Acme Corp.")
    remember(client, A, "Initech is our new vendor.")
    found = entities(client, A)
    acme, initech = found["Acme Corp"]["id"], found["Initech"]["id"]

    def merge() -> int:
        """Ann's merge of Acme Corp into Initech"""
        body = {"duplicate_id": acme}
        return client.post(f"/api/entities/{initech}/merge", json=body, headers=user(A)).status_code

    status, answers = while_renaming(client, gated, acme, [merge])
    assert answers == [200] and status == 404
    found = entities(client, A)
    assert "Acme Corp" not in found and NEW_NAME not in found
    assert found["Initech"]["aliases"] == ["Acme Corp"]
    index = coordinator.entities.vector_index()
    assert index is not None and acme not in index.vectors(A, [acme, initech])
