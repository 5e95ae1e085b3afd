"""Records written outside session ingestion while the embedder is down get their vectors later.

A memory created (``POST /api/memory/memories``), edited (``PUT``) or imported, and the Dreamer's
conclusions, stored for keyword search only, are noted in the user's pending set like an ingested
batch, and the maintenance sweep embeds them. Through the HTTP API, the bundled ONNX model as the
embedder that is back and a failing one swapped in as the one that is down
(:class:`tests.test_pending_vectors.SwitchableEmbedder`); real Redis, keys read back directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory import vector_repair
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore
from tests.helpers import run_maintenance, talk, user
from tests.test_pending_vectors import SwitchableEmbedder, pending, swap_embedder, sweep_settings

ANA = "ana"
LISBON = "My sister Ana moved to Lisbon last spring and she adores her new flat there."
GARDEN = "I planted tomatoes and basil in the garden behind the house."
PARAPHRASE = "sibling relocating abroad, Portugal"  # no word of LISBON
GARDEN_PARAPHRASE = "vegetables growing outdoors at home"  # no word of GARDEN

Api = tuple[TestClient, SwitchableEmbedder, MemoryCoordinator]


@pytest.fixture
def api(settings: Settings, tmp_path: Path) -> Iterator[Api]:
    """The ONNX embedder behind a switch; an import home holding one CLAUDE.md bullet (LISBON)."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text(f"- {LISBON}\n")
    coordinator = MemoryCoordinator(sweep_settings(settings, import_home=home, import_enabled=True))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, swap_embedder(coordinator), coordinator
    finally:
        coordinator.close()


def found(client: TestClient, q: str) -> list[str]:
    """Texts of ``GET /api/memory/memories?q=`` (hybrid; keyword only while the embedder is down)."""
    response = client.get("/api/memory/memories", params={"q": q}, headers=user(ANA))
    assert response.status_code == 200, response.text
    return [m["text"] for m in response.json()["memories"]]


def post_memory(client: TestClient, text: str) -> str:
    response = client.post("/api/memory/memories", json={"text": text}, headers=user(ANA))
    assert response.status_code == 201, response.text
    return str(response.json()["memory"]["id"])


def pending_members(raw: redis.Redis, prefix: str) -> set[str]:
    """Ana's pending records (entity names, tests/test_entity_vector_repair.py, left out)."""
    members = {m.decode() for m in raw.zrange(f"{prefix}:u:{{{ANA}}}:vectors:_pending", 0, -1)}
    return {m for m in members if not m.startswith("entity:")}


def vector_ids(raw: redis.Redis, prefix: str, namespace: str) -> set[str]:
    return {k.decode() for k in raw.hkeys(f"{prefix}:u:{{{ANA}}}:{namespace}:_idx:vec:data")}


def sweep(client: TestClient) -> dict[str, object]:
    run = run_maintenance(client, ANA)
    assert run["status"] == "completed", run
    filled: dict[str, object] = run["report"]["summary"]["vectorsFilled"]
    return filled


def test_a_memory_posted_while_down_is_found_by_meaning_after_the_sweep(api: Api) -> None:
    client, switch, _ = api
    switch.down = True
    post_memory(client, LISBON)
    assert found(client, "Lisbon") == [LISBON]  # by keyword at once
    assert pending(client) == 4  # the memory and the 3 entity names it brought (the graph's)
    switch.down = False
    assert found(client, PARAPHRASE) == []  # no vector yet, and no word shared
    assert sweep(client) == {"filled": 4, "gone": 0, "error": None}
    assert found(client, PARAPHRASE)[:1] == [LISBON]
    assert pending(client) == 0


def test_an_edit_while_down_gets_the_new_texts_vector(api: Api, raw_redis: redis.Redis, key_prefix: str) -> None:
    client, switch, _ = api
    memory_id = post_memory(client, GARDEN)
    assert found(client, GARDEN_PARAPHRASE)[:1] == [GARDEN]
    assert pending(client) == 0  # stored with its vector: nothing noted
    switch.down = True
    edited = client.put(f"/api/memory/memories/{memory_id}", json={"text": LISBON}, headers=user(ANA))
    assert edited.status_code == 200, edited.text
    assert pending_members(raw_redis, key_prefix) == {f"memory:{memory_id}"}
    switch.down = False
    assert found(client, PARAPHRASE) == []  # the new text has no vector yet
    assert found(client, GARDEN_PARAPHRASE) == []  # and the old text's went with it
    assert sweep(client) == {"filled": 4, "gone": 0, "error": None}  # with the 3 entity names of the new text
    assert found(client, PARAPHRASE)[:1] == [LISBON]
    assert found(client, GARDEN_PARAPHRASE)[:1] != [LISBON]  # the vector is the new text's
    assert pending(client) == 0


def test_an_imported_memory_is_filled(api: Api, raw_redis: redis.Redis, key_prefix: str) -> None:
    client, switch, coordinator = api
    service_key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("service", "importer")
    client.headers["Authorization"] = f"Bearer {service_key}"  # imports need a service key (issue 15)
    switch.down = True
    imported = client.post("/api/memory/import", json={"sources": ["claude_code"]}, headers=user(ANA))
    assert imported.status_code == 200, imported.text
    assert imported.json()["memoriesAdded"] == 1
    assert found(client, "Lisbon") == [LISBON]
    assert pending(client) == 1
    switch.down = False
    assert sweep(client) == {"filled": 1, "gone": 0, "error": None}
    assert found(client, PARAPHRASE)[:1] == [LISBON]
    assert len(vector_ids(raw_redis, key_prefix, "memory")) == 1


DREAM_TURNS = (
    ("user", "I just moved to Lisbon last month with my wife Ana and our dog Pixel."),
    ("assistant", "Welcome to Lisbon!"),
    ("user", "I am allergic to peanuts."),
)


def test_dreamer_conclusions_stored_while_down_are_filled_and_a_forgotten_one_is_not(
    api: Api, raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, switch, _ = api
    switch.down = True
    assert talk(client, ANA, "lisbon", *DREAM_TURNS)["saved"] is True  # the Dreamer runs at the session end
    dreamt = client.post("/api/memory/dream", headers=user(ANA))  # and again: still no vectors
    assert dreamt.status_code == 200, dreamt.text
    listed = client.get("/api/memory/conclusions", headers=user(ANA)).json()["conclusions"]
    texts = {c["text"]: c["id"] for c in listed}
    assert {"User lives in Lisbon", "User is allergic to peanuts"} <= set(texts)
    noted = {m for m in pending_members(raw_redis, key_prefix) if m.startswith("conclusion:")}
    assert noted == {f"conclusion:{i}" for i in texts.values()}
    assert vector_ids(raw_redis, key_prefix, "conclusion") == set()
    waiting = pending(client)
    forgotten = texts.pop("User lives in Lisbon")
    gone = client.post("/api/memory/forget", json={"kind": "conclusion", "id": forgotten}, headers=user(ANA))
    assert gone.status_code == 200, gone.text
    assert f"conclusion:{forgotten}" not in pending_members(raw_redis, key_prefix)  # its note went with it
    assert pending(client) == waiting - 1
    switch.down = False
    assert sweep(client) == {"filled": waiting - 1, "gone": 0, "error": None}
    assert vector_ids(raw_redis, key_prefix, "conclusion") == set(texts.values())  # none for the forgotten one
    assert pending(client) == 0
    allergy = texts["User is allergic to peanuts"]
    asked = client.post("/api/memory/ask", json={"question": "food intolerance to nuts?"}, headers=user(ANA))
    assert asked.status_code == 200, asked.text
    assert allergy in asked.json()["evidenceIds"]  # found by meaning: no word of the question in it


def test_a_user_who_opted_out_gets_no_vector_and_their_pending_records_are_dropped(
    api: Api, raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, switch, coordinator = api
    switch.down = True
    post_memory(client, LISBON)
    assert pending(client) == 4  # the memory and the 3 entity names it brought
    opted = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user(ANA))
    assert opted.status_code == 200, opted.text
    switch.down = False
    assert vector_repair.fill_pending(coordinator.services) == vector_repair.FillReport(0, 0, None)
    assert vector_ids(raw_redis, key_prefix, "memory") == set()  # nothing written for them
    assert pending(client) == 0
    assert pending_members(raw_redis, key_prefix) == set()
    assert raw_redis.smembers(f"{key_prefix}:meta:pending_vectors") == set()
