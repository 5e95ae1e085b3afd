"""Redis killed in the middle of batch ingestion: the flow's retries finish the job, exactly once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agtos.config import Settings
from agtos.flows.ingestion_flow import ingestion_flow
from agtos.flows.runtime import use_runtime
from agtos.memory.coordinator import MemoryCoordinator
from agtos.storage.episodes import EpisodeStore
from tests.redis_process import RedisProcess

BATCH = 30


@pytest.fixture
def aof_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis", appendonly=True).start()
    yield server
    server.stop()


def sessions() -> list[dict]:
    return [
        {
            "user_id": "fault-user",
            "session_id": f"s{i:02d}",
            "turns": [
                {"role": "user", "content": f"I prefer seat {i}A on the morning train to Lyon."},
                {"role": "assistant", "content": "Noted."},
            ],
        }
        for i in range(BATCH)
    ]


def test_redis_killed_mid_batch_every_episode_lands_exactly_once(
    aof_redis: RedisProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(redis_url=aof_redis.url, key_prefix="fault", data_dir=tmp_path, redis_timeout_s=0.3)
    coordinator = MemoryCoordinator(settings)
    saves = {"n": 0}
    original_save = EpisodeStore.save_unless_opted_out

    def save_then_crash(self: EpisodeStore, *args):  # type: ignore[no-untyped-def]
        result = original_save(self, *args)  # the batch's records, one atomic write with the opt-out check
        saves["n"] += 1
        if saves["n"] == 1:  # the records are written, their index entries not yet: the server dies
            aof_redis.kill()
            threading.Timer(2.0, aof_redis.start).start()
        return result

    monkeypatch.setattr(EpisodeStore, "save_unless_opted_out", save_then_crash)
    use_runtime(coordinator.services)
    try:
        report = ingestion_flow(sessions())
    finally:
        use_runtime(None)
    assert report["stored"] == BATCH
    assert saves["n"] > 1  # the index task ran again after the crash

    raw = redis.Redis.from_url(aof_redis.url)
    episode_keys = list(raw.scan_iter(match="fault:u:{fault-user}:episode:ep-*"))
    assert len(episode_keys) == BATCH
    assert raw.zcard("fault:u:{fault-user}:episodes:by_time") == BATCH
    assert coordinator.semantic.store("episode").bm25.count("fault-user") == BATCH
    assert coordinator.semantic.store("episode").vectors.count("fault-user") == BATCH
    hits = coordinator.search_episodes("fault-user", "seat 17A morning train", 3)
    assert hits and hits[0].episode.session_id == "s17"
    coordinator.close()
