"""The repair sweep and a rename between its embedding and its write: no vector of the old name stays (issue 15, d8).

The sweep (:mod:`agtos.memory.vector_repair`) reads an entity's name, embeds it, then writes its vector. A rename
(entity ``PUT``, another request or process) landing between the read and the write writes the new name and its
vector; the sweep's vector of the old name then lands over it. Before the fix the sweep only noted the entity
again, so the old name's vector stood (dedup at cosine 0.85 matched the old name's look-alikes to it) until a
later batch embedded the new name, and until the next sweep if this one stopped first. The sweep now removes
it, and the next batch or sweep writes the new name's own.

Through HTTP (the maintenance run as a user triggers it), real Redis, the bundled ONNX model behind the hooked
switch of tests/test_forget_pending_vectors.py (a rename inside the sweep's embedding call); the vectors compared
with the model's own embedding of the names.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_forget_pending_vectors import api, end_while_down, sweep  # noqa: F401 - api: a fixture
from tests.test_forget_races import HookedEmbedder
from tests.test_pending_vectors import ANA, LISBON, pending

OLD_NAME, NEW_NAME = "Lisbon", "Lisboa"


def name_vector(coordinator: MemoryCoordinator, entity_id: str) -> np.ndarray | None:
    index = coordinator.entities.vector_index()
    assert index is not None
    return index.vectors(ANA, [entity_id]).get(entity_id)


def cosine(switch: HookedEmbedder, vector: np.ndarray, name: str) -> float:
    """Cosine of ``vector`` with the bundled model's own embedding of ``name``."""
    expected = switch.real.embed([name])[0]
    return float(np.dot(vector, expected) / (np.linalg.norm(vector) * np.linalg.norm(expected)))


def test_a_rename_between_the_sweeps_embedding_and_its_write_leaves_no_vector_of_the_old_name(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
) -> None:
    """The Lisbon session stored while the embedder was down; a maintenance run's sweep has read the entity
    Lisbon and embeds its name when a PUT renames it to Lisboa (name and vector); then the sweep writes, and
    its next embedding call (Lisboa's, noted again) fails, so the sweep stops there. No vector of Lisbon may
    stand beside the stored name Lisboa: none (pending) or Lisboa's own; the next sweep writes Lisboa's own.
    Bug caught: the sweep noting a renamed entity again without removing the old name's vector it wrote
    (Lisbon's, cosine 1.0, kept)."""
    client, switch, coordinator = api
    end_while_down(client, switch, "lisbon", LISBON)
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(ANA)).json()["entities"]
    lisbon = next(e["id"] for e in listed if e["name"] == OLD_NAME)
    switch.down = False

    def go_down() -> None:
        switch.down = True

    def rename() -> None:  # inside the sweep's batch call: the names read, no vector written yet
        renamed = client.put(f"/api/entities/{lisbon}", json={"name": NEW_NAME}, headers=user(ANA))
        assert renamed.status_code == 200, renamed.text
        switch.hook = go_down  # the sweep's next call (the new name's) fails

    switch.hook = rename
    assert sweep(client)["error"] == "embedder unavailable"
    assert switch.hook is None and switch.down  # the rename ran inside the sweep's call, and the next one failed
    vector = name_vector(coordinator, lisbon)
    if vector is not None:
        assert cosine(switch, vector, NEW_NAME) == pytest.approx(1.0, abs=1e-3), (
            f"the vector of {OLD_NAME!r} (cosine {cosine(switch, vector, OLD_NAME):.3f}) stands beside {NEW_NAME!r}"
        )
    assert pending(client) == 1  # Lisboa waits for the next sweep
    switch.down = False
    assert sweep(client) == {"filled": 1, "gone": 0, "error": None}
    vector = name_vector(coordinator, lisbon)
    assert vector is not None, "the renamed entity got no vector from the next sweep"
    assert cosine(switch, vector, NEW_NAME) == pytest.approx(1.0, abs=1e-3)
    assert pending(client) == 0
