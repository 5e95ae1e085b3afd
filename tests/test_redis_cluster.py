"""Scale-out past one Redis: the API against a real three-master Redis Cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.redis_process import RedisClusterProcesses

USERS = [f"user{i}" for i in range(6)]


@pytest.fixture
def client(cluster: RedisClusterProcesses, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        redis_url=cluster.url, key_prefix="agtos", data_dir=tmp_path / "data", config_dir=tmp_path / "config"
    )
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as test_client:
        yield test_client
    coordinator.close()


def remember(client: TestClient, user: str, session: str, *texts: str) -> None:
    headers = {"X-User-Id": user}
    turns = {
        "turns": [
            {"role": role, "content": t} for text in texts for role, t in (("user", text), ("assistant", "Noted."))
        ]
    }
    assert client.post(f"/api/memory/sessions/{session}/turns", json=turns, headers=headers).status_code == 200
    ended = client.post(f"/api/memory/sessions/{session}/end", headers=headers)
    assert ended.status_code == 200 and ended.json()["saved"] is True, ended.text


def test_memory_round_trip_on_a_redis_cluster(client: TestClient, cluster: RedisClusterProcesses) -> None:
    health = client.get("/health").json()
    assert health["tiers"]["episodic"]["redis"]["mode"] == "cluster"
    for i, user in enumerate(USERS):
        remember(client, user, "s1", f"I moved to Lisbon in May and I prefer green tea, code zq{i}x.")
        remember(client, user, "s2", "My sister Anna works as a nurse in Porto.", "She visits us every summer.")
    assert sum(1 for n in cluster.key_counts() if n) >= 2  # users' keys spread over several masters

    for i, user in enumerate(USERS):
        headers = {"X-User-Id": user}
        for mode in ("hybrid", "vector", "bm25"):
            hits = client.get("/api/memory/search", params={"q": "green tea Lisbon", "mode": mode}, headers=headers)
            assert hits.status_code == 200 and hits.json()["count"] >= 1, (mode, hits.text)
        exact = client.get("/api/memory/search", params={"q": f"zq{i}x", "mode": "bm25"}, headers=headers).json()
        assert [h["summary"] for h in exact["results"]] and f"zq{i}x" in exact["results"][0]["summary"]
        other = client.get("/api/memory/search", params={"q": f"zq{i + 1}x", "mode": "bm25"}, headers=headers)
        assert other.json()["count"] == 0  # no user sees another's exact token

    headers = {"X-User-Id": USERS[0]}
    conclusions = client.get("/api/memory/conclusions", headers=headers).json()
    assert conclusions["count"] >= 1
    assert any(e["name"] == "Lisbon" for e in client.get("/api/entities", headers=headers).json()["entities"])
    context = client.post("/api/memory/context", json={"query": "what do I drink?"}, headers=headers).json()
    assert "tea" in context["context"]

    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=headers).json()["keysDeleted"] > 0
    gone = client.get("/api/memory/search", params={"q": "green tea Lisbon"}, headers=headers).json()
    assert gone["count"] == 0
    still = client.get("/api/memory/search", params={"q": "green tea Lisbon"}, headers={"X-User-Id": USERS[1]})
    assert still.json()["count"] >= 1
