"""Auth fails closed when Redis loses its data (found probing ``agtos serve`` against a private
redis-server restarted without persistence, issue 15 / H3): the running API had auth on, the
restarted Redis held no key and no marker, and every call without a key was served again, as any
user. A process that saw auth on now keeps it on while the marker is missing; only an explicit
``agtos keys off`` (marker ``0``) switches it off."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from tests.helpers import user
from tests.test_auth import bearer, store_of


def test_auth_stays_on_when_redis_lost_its_keys(client: TestClient, raw_redis: redis.Redis, key_prefix: str) -> None:
    store = store_of(client)
    key, _ = store.create("service", "bot")
    assert client.get("/api/memory/episodes", headers=bearer(key, **user("eve"))).status_code == 200
    assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 401
    raw_redis.delete(f"{key_prefix}:{{auth}}:keys", f"{key_prefix}:{{auth}}:on")  # a restart without its data
    for headers in (user("eve"), bearer(key, **user("eve"))):
        lost = client.get("/api/memory/episodes", headers=headers)
        assert lost.status_code == 401, lost.text
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("eve")).status_code == 401
    # the operator's explicit off is honoured: recreate, revoke, `agtos keys off`
    _, record = store.create("service", "bot")
    assert store.revoke(record.id) and store.disable()
    assert client.get("/api/memory/episodes", headers=user("eve")).status_code == 200
