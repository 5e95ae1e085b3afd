"""The NLI verdict cache on any Redis: hash fields with HEXPIRE where the server has it (Redis >= 7.4),
STRING keys with EX elsewhere. Which branch a server gets is probed here, never assumed: the shared
test Redis (7.0 on Debian 12) takes the STRING branch and the private Redis 8.2 of the dev extra
(``stack_redis``) the HEXPIRE branch, so both run in CI."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.nli_cache import NLICache
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.contradiction import NLIVerdict, pair_cache_key
from tests.helpers import delete_prefix

THIRTY_DAYS_S = 2_592_000  # the cache lifetime: 30 days
U = "nina"


def server_has_hexpire(client: redis.Redis, prefix: str) -> bool:
    """Ask the server itself: does HEXPIRE exist? (independent of the cache's version check)"""
    probe = f"{prefix}:probe"
    client.hset(probe, "f", "1")
    try:
        client.execute_command("HEXPIRE", probe, 60, "FIELDS", 1, "f")
        return True
    except redis.ResponseError as exc:
        if "unknown command" not in str(exc).lower():
            raise
        return False
    finally:
        client.delete(probe)


@pytest.fixture(params=["shared-redis", pytest.param("redis-7.4+", marks=pytest.mark.optional_backend)])
def server_url(request: pytest.FixtureRequest, redis_url: str) -> str:
    return redis_url if request.param == "shared-redis" else str(request.getfixturevalue("stack_redis").url)


@pytest.fixture
def cache_env(server_url: str, tmp_path) -> Iterator[tuple[NLICache, redis.Redis, str, bool]]:
    """(cache with the 30-day default TTL, raw client, key prefix, whether the server has HEXPIRE)."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(server_url)
    connector = RedisConnector(server_url, tmp_path)
    yield NLICache(connector, GlobalKeys(prefix)), client, prefix, server_has_hexpire(client, prefix)
    connector.close()
    delete_prefix(server_url, prefix)


def keys_by_type(client: redis.Redis, prefix: str) -> dict[str, list[bytes]]:
    """Every key of the namespace grouped by Redis type (``string``, ``hash``...)."""
    out: dict[str, list[bytes]] = {}
    for key in client.scan_iter(match=f"{prefix}:*"):
        out.setdefault(client.type(key).decode(), []).append(key)
    return out


def verdicts(n: int) -> dict[str, NLIVerdict]:
    return {
        pair_cache_key("model", f"a{i}", f"b{i}"): NLIVerdict("contradiction", {"contradiction": 0.9, "neutral": 0.1})
        for i in range(n)
    }


def test_layout_and_thirty_day_ttl_follow_the_server(cache_env: tuple[NLICache, redis.Redis, str, bool]) -> None:
    cache, client, prefix, hexpire = cache_env
    assert cache.field_expiry_supported() is hexpire  # the version check agrees with the server
    stored = verdicts(3)
    cache.put_many(U, stored)
    got = cache.get_many(U, [*stored, "missing-key"])
    assert set(got) == set(stored) and all(v.label == "contradiction" for v in got.values())
    assert got[next(iter(stored))].scores == {"contradiction": 0.9, "neutral": 0.1}

    found = keys_by_type(client, prefix)
    if hexpire:  # one hash, a 30-day TTL on each of its fields, the hash itself without one
        assert set(found) == {"hash"} and len(found["hash"]) == 1
        (hash_key,) = found["hash"]
        assert client.hlen(hash_key) == 3
        ttls = client.execute_command("HTTL", hash_key, "FIELDS", 3, *stored)
        assert all(THIRTY_DAYS_S - 5 <= t <= THIRTY_DAYS_S for t in ttls), ttls
        assert client.ttl(hash_key) == -1
    else:  # one STRING key per verdict, named by its digest, each with the 30-day TTL
        assert set(found) == {"string"} and len(found["string"]) == 3
        assert {k.decode().rsplit(":", 1)[1] for k in found["string"]} == set(stored)
        assert all(THIRTY_DAYS_S - 5 <= client.ttl(k) <= THIRTY_DAYS_S for k in found["string"])
    assert all(k.startswith(f"{prefix}:u:".encode()) for keys in found.values() for k in keys)  # the user's space


def test_verdicts_really_expire(cache_env: tuple[NLICache, redis.Redis, str, bool]) -> None:
    cache, client, prefix, _ = cache_env
    cache.ttl_s = 1
    old = verdicts(2)
    cache.put_many(U, old)
    assert set(cache.get_many(U, list(old))) == set(old)
    deadline = time.monotonic() + 5
    while cache.get_many(U, list(old)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cache.get_many(U, list(old)) == {}
    assert keys_by_type(client, prefix) == {}  # expired fields take the emptied hash with them
    cache.ttl_s = THIRTY_DAYS_S
    fresh = verdicts(1)
    cache.put_many(U, fresh)  # the cache is usable again after its entries expired
    assert set(cache.get_many(U, list(fresh))) == set(fresh)


def test_empty_calls_touch_nothing(cache_env: tuple[NLICache, redis.Redis, str, bool]) -> None:
    cache, client, prefix, _ = cache_env
    assert cache.get_many(U, []) == {}
    cache.put_many(U, {})
    assert keys_by_type(client, prefix) == {}
