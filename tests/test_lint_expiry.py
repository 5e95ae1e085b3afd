"""The nightly lint sweeps index entries whose episode and turns expired (search only drops the
ones it happens to meet): after a sweep, no index hash of the user names the expired episode."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import isolated_app, run_maintenance, talk, user, user_key_names

U = "expiring"


@pytest.fixture
def app(redis_url: str, tmp_path: Path) -> Iterator[tuple[TestClient, MemoryCoordinator, str]]:
    with isolated_app(redis_url, tmp_path) as built:
        yield built


def index_fields(raw: redis.Redis, prefix: str) -> set[str]:
    """Every field of every index hash of the user (BM25 and vector, all namespaces), by SCAN/HSCAN."""
    out: set[str] = set()
    for key in user_key_names(raw, prefix, U):
        if raw.type(key) == b"hash":
            out |= {f.decode() for f, _ in raw.hscan_iter(key, count=1_000)}
    return out


def test_lint_prunes_the_index_entries_of_expired_episodes_and_turns(
    app: tuple[TestClient, MemoryCoordinator, str], raw_redis: redis.Redis
) -> None:
    client, coordinator, prefix = app
    gone = talk(
        client,
        U,
        "old",
        ("user", "I repaired the garden shed roof with cedar shingles last weekend."),
        ("assistant", "Cedar shingles last a long time."),
        ("user", "I also painted the shed door dark green."),
    )["episode"]["id"]
    kept = talk(client, U, "new", ("user", "I am planning a trip to Oslo in the spring to see the fjords."))["episode"]
    turn_ids = {f"{gone}.t{n}" for n in range(3)}
    assert turn_ids <= set(coordinator.semantic.turns.bm25.ids(U)) and turn_ids <= set(
        coordinator.semantic.turns.vectors.ids(U)
    )
    # the old episode's TTL runs out (its record and its turn list, as Redis expires them)
    for key in user_key_names(raw_redis, prefix, U):
        if key.endswith(f":episode:{gone}") or key.endswith(f":turns:{gone}"):
            raw_redis.pexpire(key, 1)
    time.sleep(0.05)
    assert not [k for k in user_key_names(raw_redis, prefix, U) if k.endswith((f":episode:{gone}", f":turns:{gone}"))]
    assert {f for f in index_fields(raw_redis, prefix) if f.startswith(gone)}  # still indexed: nothing read them
    report = run_maintenance(client, U)["report"]
    assert report["summary"]["expiredIndexEntries"] == {"episode": 1, "turn": 3}
    fields = index_fields(raw_redis, prefix)
    assert not {f for f in fields if f.startswith(gone)}
    assert {kept["id"], f"{kept['id']}.t0"} <= fields  # the live episode and its turn stay indexed
    assert not turn_ids & set(coordinator.semantic.turns.bm25.ids(U))
    hits = client.get("/api/memory/search", params={"q": "Oslo fjords"}, headers=user(U)).json()["results"]
    assert [h["id"] for h in hits] == [kept["id"]]
