"""Import through the API, forgetting, opt-out, and TTL expiry honoured by the indexes."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Episode, IngestItem
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore
from tests.helpers import SKIPPED, talk, user

_spec = importlib.util.spec_from_file_location(
    "make_import_fixtures", Path(__file__).parent / "fixtures" / "make_import_fixtures.py"
)
assert _spec and _spec.loader
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)


def user_keys(raw: redis.Redis, prefix: str, user_id: str) -> list[bytes]:
    return list(raw.scan_iter(match=f"{prefix}:u:{{{user_id}}}:*", count=1000))


@pytest.fixture
def import_client(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    """A client whose import home (AGTOS_IMPORT_HOME) holds every tool's fixture files."""
    home = make_fixtures.build_home(tmp_path / "home")
    coordinator = MemoryCoordinator(settings.with_overrides(import_home=home, import_enabled=True))
    service_key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("service", "importer")
    with TestClient(create_app(coordinator=coordinator)) as client:
        client.headers["Authorization"] = f"Bearer {service_key}"  # issue 15: imports need a service key
        yield client
    coordinator.close()


def test_import_is_idempotent(import_client: TestClient) -> None:
    client = import_client
    listed = client.get("/api/memory/sources").json()
    assert {s["source"] for s in listed["sources"]} >= {"claude_code", "cursor", "aider", "copilot"}
    first = client.post("/api/memory/import", json={}, headers=user("ivy")).json()
    assert first["episodesAdded"] > 0 and first["memoriesAdded"] > 0 and first["episodesUpdated"] == 0
    imported = client.get("/api/memory/memories", params={"limit": 1}, headers=user("ivy")).json()["memories"][0]
    edit = {"text": "User edited this imported memory"}
    assert client.put(f"/api/memory/memories/{imported['id']}", json=edit, headers=user("ivy")).status_code == 200
    second = client.post("/api/memory/import", json={}, headers=user("ivy")).json()
    assert second["episodesAdded"] == 0 and second["memoriesAdded"] == 0
    # nothing changed on disk: every session (stored or skipped) and memory item is left as it is (H3)
    assert second["episodesUpdated"] == 0 and second["skipped"] == []
    assert second["unchanged"] == second["sessions"] == first["sessions"]
    assert second["memoriesUnchanged"] == first["memoriesAdded"]
    kept = client.get(f"/api/memory/memories/{imported['id']}", headers=user("ivy")).json()
    assert kept["text"] == edit["text"]  # the user's edit outlives an import again
    episodes = client.get("/api/memory/episodes", params={"limit": 100}, headers=user("ivy")).json()
    assert episodes["count"] == first["episodesAdded"]
    only = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ivan")).json()
    assert only["episodesAdded"] >= 1 and only["memoriesAdded"] == 0
    assert client.post("/api/memory/import", json={"sources": ["emacs"]}, headers=user("ivy")).status_code == 422


def test_a_reimport_processes_only_the_sessions_that_changed(import_client: TestClient, tmp_path: Path) -> None:
    """Issue 15 (H3): an import again after a stored chat changed and one was added re-ingests those two
    only; the chat skipped before as small talk is not judged again (before: every session was
    summarised, embedded and written again, ``episodesUpdated`` all of them)."""
    client = import_client
    history = tmp_path / "home" / "projects" / "webapp" / ".aider.chat.history.md"
    first = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ida")).json()
    assert (first["sessions"], first["episodesAdded"], len(first["skipped"]), first["unchanged"]) == (2, 1, 1, 0)
    stored_chat = "#### Keep it short.  \n"  # the first chat (stored); the second is skipped as small talk
    text = history.read_text()
    assert stored_chat in text
    history.write_text(
        text.replace(stored_chat, stored_chat + "#### I moved to Lisbon last month and I prefer metric units.\n")
        + "\n# aider chat started at 2024-06-01 08:00:00\n\n#### I adopted a cat named Miso.\n\nLovely!\n"
    )
    second = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ida")).json()
    assert (second["sessions"], second["episodesAdded"], second["episodesUpdated"], second["unchanged"]) == (3, 1, 1, 1)
    assert second["skipped"] == []
    third = client.post("/api/memory/import", json={"sources": ["aider"]}, headers=user("ida")).json()
    assert (third["episodesAdded"], third["episodesUpdated"], third["unchanged"]) == (0, 0, second["sessions"])
    for found in ("cat Miso", "moved to Lisbon"):
        assert found.split()[-1] in client.get("/api/memory/search", params={"q": found}, headers=user("ida")).text


def seed_everything(client: TestClient, coordinator: MemoryCoordinator, user_id: str) -> None:
    talk(
        client,
        user_id,
        "s1",
        ("user", "I prefer metric units and I work at Acme Corp in Berlin."),
        ("assistant", "Noted."),
    )
    talk(
        client,
        user_id,
        "s2",
        ("user", "Alice works at Acme Corp in Berlin; her project Falcon is due Friday."),
        ("user", "I prefer short answers about Falcon."),
        ("assistant", "Understood."),
    )
    coordinator.dream(user_id)


def test_forget_everything_leaves_nothing_in_any_tier(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    seed_everything(client, coordinator, "fay")
    seed_everything(client, coordinator, "gus")
    assert coordinator.list_conclusions("fay") and coordinator.search_memories("fay", "metric units", 5)
    assert client.get("/api/entities", headers=user("fay")).json()["count"] > 0
    body = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("fay")).json()
    assert body["keysDeleted"] > 0
    assert user_keys(raw_redis, key_prefix, "fay") == []
    for mode in ("hybrid", "vector", "bm25"):
        found = client.get(
            "/api/memory/search", params={"q": "metric units Acme Falcon", "mode": mode}, headers=user("fay")
        ).json()
        assert found["count"] == 0
    assert coordinator.search_memories("fay", "metric units", 5) == []
    assert coordinator.list_conclusions("fay") == []
    assert client.get("/api/entities", headers=user("fay")).json()["count"] == 0
    context = client.post("/api/memory/context", json={"query": "metric units"}, headers=user("fay")).json()
    assert context["items"] == []
    assert "fay" not in coordinator.known_users()
    # the other user is untouched
    assert client.get("/api/memory/search", params={"q": "metric units"}, headers=user("gus")).json()["count"] > 0


def test_forget_one_episode(client: TestClient) -> None:
    ended = talk(client, "hal", "s1", ("user", "I prefer window seats on long flights."), ("assistant", "Noted."))
    episode_id = ended["episode"]["id"]
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers=user("hal"))
    assert gone.status_code == 200
    for mode in ("hybrid", "vector", "bm25"):
        found = client.get(
            "/api/memory/search", params={"q": "window seats flights", "mode": mode}, headers=user("hal")
        ).json()
        assert episode_id not in [r["id"] for r in found["results"]]
    again = client.post("/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers=user("hal"))
    assert again.status_code == 404 and again.json()["message"]
    bad = client.post("/api/memory/forget", json={"kind": "all", "id": "x"}, headers=user("hal"))
    assert bad.status_code == 422


def test_opted_out_user_writes_nothing(client: TestClient, raw_redis: redis.Redis, key_prefix: str) -> None:
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("oz")).json()["optOut"] is True
    turns = {"turns": [{"role": "user", "content": "I prefer tea. My name is Oz."}]}
    live = client.post("/api/memory/sessions/s1/turns", json=turns, headers=user("oz")).json()
    assert live["messageCount"] == 1  # working memory still works
    assert client.get("/api/memory/sessions/s1", headers=user("oz")).json()["messageCount"] == 1
    ended = client.post("/api/memory/sessions/s1/end", headers=user("oz")).json()
    assert ended == {
        "sessionId": "s1",
        "saved": False,
        "reason": "user opted out of persistence",
        "episode": None,
        **SKIPPED,
    }
    assert client.put("/api/memory/profile", json={"name": "Oz"}, headers=user("oz")).status_code == 403
    response = {"session_id": "s1", "response": "A long analysis " * 100, "tool_calls": 3}
    assert client.post("/api/memory/responses", json=response, headers=user("oz")).status_code == 403
    assert user_keys(raw_redis, key_prefix, "oz") == []
    assert client.get("/api/memory/privacy", headers=user("oz")).json()["optOut"] is True
    # opting back in allows writes again
    client.put("/api/memory/privacy", json={"opt_out": False}, headers=user("oz"))
    assert talk(client, "oz", "s2", ("user", "I prefer tea."), ("assistant", "Ok."))["saved"] is True


def test_opt_out_can_forget_existing(client: TestClient, raw_redis: redis.Redis, key_prefix: str) -> None:
    talk(client, "pia", "s1", ("user", "I prefer cold brew coffee."), ("assistant", "Noted."))
    assert user_keys(raw_redis, key_prefix, "pia")
    body = client.put(
        "/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=user("pia")
    ).json()
    assert body["keysDeleted"] > 0 and user_keys(raw_redis, key_prefix, "pia") == []


def test_expired_episode_never_shows_in_search(
    coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    episode = Episode(id="ep-short", user_id="tia", summary="Booked the XQ-77 ferry to Capri", keywords=["ferry"])
    coordinator.ingest([IngestItem(user_id="tia", episode=episode)])
    assert [h.episode.id for h in coordinator.search_episodes("tia", "XQ-77 ferry", 5)] == ["ep-short"]
    raw_redis.pexpire(f"{key_prefix}:u:{{tia}}:episode:ep-short", 50)
    time.sleep(0.2)
    for mode in ("hybrid", "vector", "bm25"):
        assert coordinator.search_episodes("tia", "XQ-77 ferry", 5, mode) == []
    assert coordinator.semantic.store("episode").bm25.count("tia") == 0  # lazily dropped from the indexes


def test_forget_one_entity_removes_it_and_its_edges(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    seed_everything(client, coordinator, "una")
    listed = client.get("/api/entities", params={"q": "Alice"}, headers=user("una")).json()["entities"]
    alice = next(e for e in listed if e["name"] == "Alice")
    assert client.get(f"/api/entities/{alice['id']}/relationships", headers=user("una")).json()
    gone = client.post("/api/memory/forget", json={"kind": "entity", "id": alice["id"]}, headers=user("una"))
    assert gone.status_code == 200
    assert client.get(f"/api/entities/{alice['id']}", headers=user("una")).status_code == 404
    leftovers = [
        k
        for k in raw_redis.scan_iter(match=f"{key_prefix}:u:{{una}}:rel:*")
        if alice["id"].encode() in raw_redis.get(k)
    ]
    assert leftovers == []
    again = client.post("/api/memory/forget", json={"kind": "entity", "id": alice["id"]}, headers=user("una"))
    assert again.status_code == 404
