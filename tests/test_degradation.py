"""Redis stopped mid-test: reads degrade, writes answer 503, nothing crashes, restart recovers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import talk, user
from tests.redis_process import RedisProcess


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def private_client(private_redis: RedisProcess, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(redis_url=private_redis.url, key_prefix="degrade", data_dir=tmp_path, redis_timeout_s=0.3)
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client
    coordinator.close()


def test_redis_down_then_back(private_redis: RedisProcess, private_client: TestClient) -> None:
    client = private_client
    talk(client, "alice", "before", ("user", "I prefer window seats on flights."), ("assistant", "Noted."))
    assert client.get("/api/memory/episodes", headers=user("alice")).json()["count"] == 1
    window = {"turns": [{"role": "user", "content": "I prefer window seats on long flights."}]}
    assert client.post("/api/memory/sessions/during/turns", json=window, headers=user("alice")).status_code == 200

    private_redis.kill()

    listed = client.get("/api/memory/episodes", headers=user("alice"))
    assert listed.status_code == 200 and listed.json() == {"episodes": [], "count": 0, "available": False}
    searched = client.get("/api/memory/search", params={"q": "flights"}, headers=user("alice"))
    assert searched.status_code == 200 and searched.json()["available"] is False
    assert client.get("/api/memory/profile", headers=user("alice")).json()["available"] is False

    health = client.get("/health").json()
    assert health["status"] == "degraded" and "episodic" in health["degraded"]
    assert health["tiers"]["working"]["available"] is True

    # issue 15 changed this: an append that cannot be journalled is refused (it used to answer 200
    # and keep the turn in this process only), so the agent retries it after the outage
    aisle = {"turns": [{"role": "user", "content": "I like aisle seats for short trips."}]}
    turns = client.post("/api/memory/sessions/during/turns", json=aisle, headers=user("alice"))
    assert turns.status_code == 503 and "unavailable" in turns.json()["message"]

    # writes say clearly that storage is down
    ended = client.post("/api/memory/sessions/during/end", headers=user("alice"))
    assert ended.status_code == 503 and "unavailable" in ended.json()["message"]
    put = client.put("/api/memory/profile", json={"name": "Alice"}, headers=user("alice"))
    assert put.status_code == 503

    private_redis.start()  # same port, empty server (no persistence configured)

    # the retried turn lands and the session can now be stored
    assert client.post("/api/memory/sessions/during/turns", json=aisle, headers=user("alice")).status_code == 200
    ended = client.post("/api/memory/sessions/during/end", headers=user("alice"))
    assert ended.status_code == 200 and ended.json()["saved"] is True
    assert client.put("/api/memory/profile", json={"name": "Alice"}, headers=user("alice")).status_code == 200
    assert client.get("/health").json()["status"] == "ok"
