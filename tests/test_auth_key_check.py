"""A presented API key is checked and charged a rate-limit token in one Redis round trip (one script:
the auth marker, the key's record and its bucket share the ``{auth}`` hash tag), so an authenticated
``POST …/turns`` costs two round trips (the key check, the journal append) where it cost three. What
the two separate calls guaranteed still holds, through HTTP on a real Redis: only a key that proves its
record spends a token (a wrong secret for a real key id, or a revoked key, drains nothing), a refused
append writes no turn, and the script runs on a Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from benchmarks.round_trips import RoundTrips
from tests.redis_process import RedisClusterProcesses
from tests.test_auth import AppFor, app_for, bearer, store_of  # noqa: F401 - app_for: a fixture

TURN = {"turns": [{"role": "user", "content": "My locker code is 4711."}]}
TURNS = "/api/memory/sessions/{}/turns"


def journalled(client: TestClient, user_id: str, session_id: str) -> int:
    """Turns in the session's Redis journal (read directly: a rate-limited key could not ask)."""
    return client.app.state.coordinator.services.journal.length(user_id, session_id)  # type: ignore[attr-defined]


def bucket_exists(client: TestClient, raw: redis.Redis, key_id: str) -> bool:
    coordinator = client.app.state.coordinator  # type: ignore[attr-defined]
    return bool(raw.exists(f"{coordinator.keys.prefix}:{{auth}}:bucket:{key_id}"))


def test_an_authenticated_append_is_two_round_trips_and_an_open_one_one(app_for: AppFor) -> None:  # noqa: F811
    """The key check with its token in one script, then the journal's script (an open install: only the
    journal). Counted on the app's own Redis client, after a first append of each (the opt-out cache)."""
    client = app_for()
    trips = RoundTrips(client.app.state.coordinator.connector.client)  # type: ignore[attr-defined]
    headers = {"X-User-Id": "olga"}
    assert client.post(TURNS.format("s1"), json=TURN, headers=headers).status_code == 200
    trips.sent.clear()
    assert client.post(TURNS.format("s1"), json=TURN, headers=headers).status_code == 200
    assert trips.sent == ["EVALSHA"]

    key, _ = store_of(client).create("service", "agent-backend")
    headers = bearer(key, **{"X-User-Id": "olga"})
    assert client.post(TURNS.format("s2"), json=TURN, headers=headers).status_code == 200
    trips.sent.clear()
    appended = client.post(TURNS.format("s2"), json=TURN, headers=headers)
    assert appended.status_code == 200 and appended.json()["journalLength"] == 2
    assert trips.sent == ["EVALSHA", "EVALSHA"]  # was ["pipeline[GET,HGET]x2", "EVALSHA", "EVALSHA"]


def test_a_wrong_secret_for_a_real_key_id_spends_no_token(app_for: AppFor, raw_redis: redis.Redis) -> None:  # noqa: F811
    """Burst 2: three forged calls (the key's id, another secret) are 401s and leave the bucket untouched;
    the genuine key then gets its 2 calls and a 429. (Planted: the script's digest check skipped.)"""
    client = app_for(rate_limit_per_s=0.01, rate_limit_burst=2)
    key, record = store_of(client).create("user", "pia")
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    for _ in range(3):
        refused = client.post(TURNS.format("s1"), json=TURN, headers=bearer(forged))
        assert refused.status_code == 401 and refused.json()["message"] == "invalid or revoked API key"
    assert not bucket_exists(client, raw_redis, record.id)
    assert journalled(client, "pia", "s1") == 0
    statuses = [client.post(TURNS.format("s1"), json=TURN, headers=bearer(key)).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert journalled(client, "pia", "s1") == 2  # the rate-limited append wrote nothing


def test_a_revoked_key_spends_nothing_and_writes_nothing(app_for: AppFor, raw_redis: redis.Redis) -> None:  # noqa: F811
    """A revoked key's append is a 401 on the next request, with no bucket made and no turn journalled;
    another process sees the revocation as well. (Planted: the token taken before the record is found.)"""
    client, other_process = app_for(), app_for()
    store = store_of(client)
    key, record = store.create("service", "old-backend")
    headers = bearer(key, **{"X-User-Id": "quentin"})
    assert client.post(TURNS.format("s1"), json=TURN, headers=headers).status_code == 200
    raw_redis.delete(f"{client.app.state.coordinator.keys.prefix}:{{auth}}:bucket:{record.id}")  # type: ignore[attr-defined]
    assert store.revoke(record.id)
    for app in (client, other_process):
        refused = app.post(TURNS.format("s1"), json=TURN, headers=headers)
        assert refused.status_code == 401 and refused.json()["message"] == "invalid or revoked API key"
    assert not bucket_exists(client, raw_redis, record.id)
    assert journalled(client, "quentin", "s1") == 1


def test_a_rate_of_zero_makes_no_bucket(app_for: AppFor, raw_redis: redis.Redis) -> None:  # noqa: F811
    """AGTOS_RATE_LIMIT_PER_S=0: appends pass and no bucket is written (the script stops before it)."""
    client = app_for(rate_limit_per_s=0.0, rate_limit_burst=1)
    key, record = store_of(client).create("user", "rosa")
    assert [client.post(TURNS.format("s1"), json=TURN, headers=bearer(key)).status_code for _ in range(3)] == [200] * 3
    assert not bucket_exists(client, raw_redis, record.id)
    assert journalled(client, "rosa", "s1") == 3


@pytest.fixture
def cluster_client(cluster: RedisClusterProcesses, tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        redis_url=cluster.url,
        key_prefix="agtos-keycheck",
        data_dir=tmp_path / "data",
        config_dir=tmp_path / "config",
        rate_limit_per_s=0.01,
        rate_limit_burst=2,
    )
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as test_client:
        yield test_client
    coordinator.close()


def test_the_key_check_runs_on_a_redis_cluster(cluster_client: TestClient) -> None:
    """One script over the marker, the keys and the bucket: one slot (``{auth}``), no CROSSSLOT error;
    the limit holds there too."""
    key, _ = store_of(cluster_client).create("service", "cluster-backend")
    headers = bearer(key, **{"X-User-Id": "sven"})
    statuses = [cluster_client.post(TURNS.format("s1"), json=TURN, headers=headers).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert journalled(cluster_client, "sven", "s1") == 2
