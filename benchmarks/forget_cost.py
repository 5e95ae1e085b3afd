"""What forgetting one episode costs as a user's memory grows (the cascade reads every memory,
conclusion and entity of the user to find what was learnt from the episode alone).

Stores ``--memories`` memories (a tenth of them learnt from the episode to forget, a tenth from it
and another), ``--memories // 10`` conclusions and ``--memories // 4`` entities for one user under
a throw-away key prefix (random vectors, no embedding), then times ``POST /api/memory/forget`` of
the episode through the app, beside the same call for an episode nothing was learnt from (the scan
alone) and the deletion of an episode's record and indexes only (what forgetting it did before the
cascade), in the same run.

    python -m benchmarks.forget_cost [--memories 1000 --memories 10000] [--redis-url redis://127.0.0.1:6379/0]

2 cores, load 4–5 (a61aa99): 1,000 memories: record and indexes 1 ms, the forget 84 ms with nothing learnt
from the episode, 147 ms with 100 memories, 10 conclusions and 25 entities forgotten with it; 10,000: 1 /
405 / 3,217 ms (1,000 memories, 100 conclusions, 250 entities forgotten).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Conclusion, ConclusionType, Entity, EntityType, Episode, Memory
from agtos.serving.app import create_app
from agtos.tasks.entity_records import name_keys

USER = "bench"


def seed(coordinator: MemoryCoordinator, n: int, forget: str, plain: str) -> None:
    """``n`` memories, n/10 conclusions, n/4 entities; a tenth of each from ``forget`` alone."""
    rt = coordinator.services
    dim = rt.semantic.embedder.dim
    rng = np.random.default_rng(7)
    ids = (forget, plain, "ep-old")
    episodes = [Episode(id=e, user_id=USER, summary=f"episode {e}", facts=[], timestamp=1) for e in ids]
    rt.semantic.store_batch(episodes, [], rng.standard_normal((3, dim)).astype(np.float32))

    def sources(i: int) -> list[str]:
        return [forget] if i % 10 == 0 else [forget, "ep-other"] if i % 10 == 1 else ["ep-other"]

    memories = [
        Memory(
            id=f"mem-{i:08x}", user_id=USER, text=f"fact number {i} about topic {i % 97}", source_episode_ids=sources(i)
        )
        for i in range(n)
    ]
    for at in range(0, n, 1_000):
        batch = memories[at : at + 1_000]
        rt.semantic.store_batch([], batch, rng.standard_normal((len(batch), dim)).astype(np.float32))
    conclusions = [
        Conclusion(
            id=f"con-{i:08x}",
            user_id=USER,
            text=f"User likes thing {i}",
            type=ConclusionType.explicit,
            confidence=0.9,
            source_episode_ids=sources(i),
        )
        for i in range(n // 10)
    ]
    rt.conclusions.upsert_many(conclusions, rng.standard_normal((len(conclusions), dim)).astype(np.float32))
    for i in range(n // 4):
        entity = Entity(user_id=USER, name=f"Place {i}", type=EntityType.place, episode_ids=sources(i))
        rt.entities.store.save_entity(entity, name_keys(entity), expect="")


def timed_forget(client: TestClient, episode_id: str) -> tuple[float, dict[str, int] | None]:
    started = time.perf_counter()
    response = client.post(
        "/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers={"X-User-Id": USER}
    )
    took = time.perf_counter() - started
    assert response.status_code == 200, response.text
    return took, response.json()["derived"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, action="append")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    print("| memories | conclusions | entities | record and indexes only (ms) |", end="")
    print(" forget, nothing learnt from it (ms) | forget, a tenth learnt from it (ms) | forgotten with it |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for n in args.memories or [1_000, 10_000]:
        prefix = f"bench-forget-{uuid.uuid4().hex[:8]}"
        data = Path(tempfile.mkdtemp())
        settings = Settings(redis_url=args.redis_url, key_prefix=prefix, data_dir=data / "d", config_dir=data / "c")
        coordinator = MemoryCoordinator(settings)
        try:
            seed(coordinator, n, "ep-forget", "ep-plain")
            started = time.perf_counter()  # what forgetting an episode did before the cascade
            assert coordinator.semantic.delete("episode", USER, "ep-old")
            old = time.perf_counter() - started
            with TestClient(create_app(coordinator=coordinator)) as client:
                plain, _ = timed_forget(client, "ep-plain")
                cascade, derived = timed_forget(client, "ep-forget")
            figures = f"{old * 1000:.0f} | {plain * 1000:.0f} | {cascade * 1000:.0f}"
            print(f"| {n:,} | {n // 10:,} | {n // 4:,} | {figures} | {derived} |")
        finally:
            coordinator.close()
            raw = redis.Redis.from_url(args.redis_url)
            for key in raw.scan_iter(match=f"{prefix}:*", count=1_000):
                raw.unlink(key)


if __name__ == "__main__":
    main()
