"""Two API processes renaming one entity at once: its name vector is the stored name's (issue 15).

An entity's ``PUT`` takes no lock across processes (each process has its own entity lock), so two
renames can interleave: one writes its name, the other writes its name and its vector, then the first
writes its vector. Before the fix the entity kept the name of the second beside the vector of the first
(the name that lost), which entity dedup then matched to mentions of that old name. A rename now checks,
after writing its vector, that the stored name is still its own, and otherwise drops the vector: the
entity waits for the repair sweep, which embeds the name it has. A rename whose vector lands after
another process deleted the entity leaves no vector either.

Two coordinators (two processes) over one Redis; the first process's vector write of the entity (after
its name is written) waits at a gate while the other process's request runs, each bounded (``BOUND_S``).
Real Redis, the bundled embedder and NER model, through HTTP; the vectors compared with the model's own
embedding of the names.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.vector_index import VectorIndex
from tests.helpers import delete_prefix, run_maintenance, user
from tests.test_entity_lock_scope import NEW_NAME, GatedEmbedder
from tests.test_entity_writers_race import Process
from tests.test_pending_vectors import sweep_settings

OLD_NAME = "Acme Corp"
FIRST = NEW_NAME  # "Acme Corporation": the first process's rename
SECOND = "Acme Holdings"  # the second process's rename
BOUND_S = 20.0  # the other process's request answers within this while the first waits at its gate (ms)
GATE_S = 60.0  # a gate opens by itself after this: a failing test ends


@pytest.fixture(scope="module")
def processes(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Process]]:
    """Two API processes over the same Redis and key prefix (one pair for the module; a user per test)."""
    prefix, base = f"agtos-test-{uuid.uuid4().hex[:10]}", tmp_path_factory.mktemp("rename-race")
    settings = sweep_settings(
        Settings(redis_url=redis_url, key_prefix=prefix, data_dir=base / "data", config_dir=base / "config")
    )
    try:
        with ExitStack() as stack:
            pair = []
            for _ in range(2):
                coordinator = MemoryCoordinator(settings)
                stack.callback(coordinator.close)
                pair.append(Process(coordinator, stack.enter_context(TestClient(create_app(coordinator=coordinator)))))
            yield pair[0], pair[1]
    finally:
        delete_prefix(redis_url, prefix)


def index_of(process: Process) -> VectorIndex:
    index = process.coordinator.entities.vector_index()
    assert index is not None
    return index


class VectorGate:
    """The process's first write of ``entity_id``'s name vector (None: of any entity's) sets ``started`` and
    waits for ``opened``."""

    def __init__(self, index: VectorIndex, entity_id: str | None) -> None:
        self.index, self.entity_id, self.add = index, entity_id, index.add
        self.started, self.opened = threading.Event(), threading.Event()

    def __call__(self, user_id: str, doc_id: str, vector: Any) -> None:
        if self.entity_id in (doc_id, None) and not self.started.is_set():
            self.started.set()
            self.opened.wait(GATE_S)
        self.add(user_id, doc_id, vector)


@contextmanager
def gated_vector_write(process: Process, entity_id: str | None) -> Iterator[VectorGate]:
    index = index_of(process)
    gate = VectorGate(index, entity_id)
    index.add = gate  # type: ignore[method-assign]
    try:
        yield gate
    finally:
        gate.opened.set()
        del index.add


@contextmanager
def gated_embedding(process: Process) -> Iterator[GatedEmbedder]:
    """The process's embedder holds a call embedding ``NEW_NAME`` (test_entity_lock_scope's gate)."""
    semantic = process.coordinator.services.semantic
    real = semantic.embedder
    gated = GatedEmbedder(real)
    semantic._embedder = gated
    try:
        yield gated
    finally:
        gated.opened.set()
        semantic._embedder = real


def acme_of(process: Process, who: str) -> str:
    """``who`` mentions Acme Corp (a new entity, with its name's vector); its id."""
    created = process.client.post(
        "/api/memory/memories", json={"text": f"We signed with {OLD_NAME}."}, headers=user(who)
    )
    assert created.status_code == 201, created.text
    return str(listed(process, who)[OLD_NAME]["id"])


def listed(process: Process, who: str) -> dict[str, dict[str, Any]]:
    response = process.client.get("/api/entities", params={"limit": 100}, headers=user(who))
    assert response.status_code == 200, response.text
    return {e["name"]: e for e in response.json()["entities"]}


def rename(process: Process, who: str, entity_id: str, name: str) -> int:
    return process.client.put(f"/api/entities/{entity_id}", json={"name": name}, headers=user(who)).status_code


def while_held(held: threading.Event, opened: threading.Event, first: Future[int], other: Future[int]) -> int:
    """``other``'s answer, given while ``first`` waits at its gate (``held``); then the gate opens."""
    try:
        assert held.wait(BOUND_S), "the first rename never reached its gate"
        answer = other.result(BOUND_S)
        assert not first.done()  # it answered while the first rename waited
    finally:
        opened.set()
    return answer


def stored_vector(process: Process, who: str, entity_id: str) -> np.ndarray | None:
    return index_of(process).vectors(who, [entity_id]).get(entity_id)


def cosine(process: Process, vector: np.ndarray, name: str) -> float:
    """Cosine of ``vector`` with the bundled model's own embedding of ``name``."""
    expected = process.coordinator.services.semantic.embedder.embed([name])[0]
    return float(np.dot(vector, expected) / (np.linalg.norm(vector) * np.linalg.norm(expected)))


def only_the_stored_names_vector(
    processes: tuple[Process, Process], who: str, entity_id: str, name: str, lost: str
) -> None:
    """The entity's vector is none or the stored ``name``'s own (never that of ``lost``, a name it had), and
    after the repair sweep (a maintenance run) ``name``'s own."""
    one, two = processes
    vector = stored_vector(two, who, entity_id)
    if vector is not None:
        assert cosine(two, vector, name) == pytest.approx(1.0, abs=1e-3), (
            f"the vector of {lost!r} (cosine {cosine(two, vector, lost):.3f}) stands beside the stored name {name!r}"
        )
    run = run_maintenance(two.client, who)
    assert run["status"] == "completed", run
    vector = stored_vector(one, who, entity_id)
    assert vector is not None, "the renamed entity got no vector from the repair sweep"
    assert cosine(one, vector, name) == pytest.approx(1.0, abs=1e-3)


def test_a_rename_whose_vector_lands_after_another_processes_rename_leaves_no_vector_of_its_name(
    processes: tuple[Process, Process],
) -> None:
    """Process 1 renames Acme Corp to Acme Corporation and, its name written, waits before its vector;
    process 2 renames it to Acme Holdings (name and vector); then process 1 writes its vector. The stored
    name is Acme Holdings: no vector of Acme Corporation may stay beside it, and after the repair sweep
    the vector is Acme Holdings' own."""
    one, two = processes
    who = "race-ann"
    acme = acme_of(one, who)
    with gated_vector_write(one, acme) as gate, ThreadPoolExecutor(2) as pool:
        first = pool.submit(rename, one, who, acme, FIRST)
        second = pool.submit(lambda: gate.started.wait(BOUND_S) and rename(two, who, acme, SECOND))
        assert while_held(gate.started, gate.opened, first, second) == 200
        assert first.result(GATE_S) == 200  # its name was written before the second's
    assert listed(two, who)[SECOND]["id"] == acme and FIRST not in listed(one, who)
    only_the_stored_names_vector(processes, who, acme, SECOND, lost=FIRST)  # the rename that lost


def test_a_rename_whose_vector_lands_after_another_process_deleted_the_entity_leaves_none(
    processes: tuple[Process, Process],
) -> None:
    """Process 1's rename has written the name and waits before its vector; process 2 deletes the
    entity (dropping its vector); process 1's vector then lands and must go again."""
    one, two = processes
    who = "race-bea"
    acme = acme_of(one, who)
    with gated_vector_write(one, acme) as gate, ThreadPoolExecutor(2) as pool:
        first = pool.submit(rename, one, who, acme, FIRST)
        deleted = pool.submit(
            lambda: (
                gate.started.wait(BOUND_S) and two.client.delete(f"/api/entities/{acme}", headers=user(who)).status_code
            )
        )
        assert while_held(gate.started, gate.opened, first, deleted) == 200
        assert first.result(GATE_S) == 200
    assert OLD_NAME not in listed(two, who) and FIRST not in listed(two, who)
    vector = stored_vector(two, who, acme)
    assert vector is None, f"the deleted entity kept the vector of {FIRST!r} (cosine {cosine(two, vector, FIRST):.3f})"


def test_a_rename_that_embeds_while_another_process_renames_ends_with_its_name_and_vector(
    processes: tuple[Process, Process],
) -> None:
    """Process 1's rename to Acme Corporation waits in its embedding; process 2 renames the entity to
    Acme Holdings (name and vector); process 1 then writes its name and vector: both Acme Corporation's."""
    one, two = processes
    who = "race-cy"
    acme = acme_of(one, who)
    with gated_embedding(one) as gated, ThreadPoolExecutor(2) as pool:
        first = pool.submit(rename, one, who, acme, FIRST)
        second = pool.submit(lambda: gated.started.wait(BOUND_S) and rename(two, who, acme, SECOND))
        assert while_held(gated.started, gated.opened, first, second) == 200
        assert first.result(GATE_S) == 200
    found = listed(one, who)
    assert found[FIRST]["id"] == acme and SECOND in found[FIRST]["aliases"]
    vector = stored_vector(one, who, acme)
    assert vector is not None and cosine(one, vector, FIRST) == pytest.approx(1.0, abs=1e-3)
