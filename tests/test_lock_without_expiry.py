"""A user's lock key without expiry heals by itself (issue 15, e1).

A key at a user's lock name that has no expiry (legacy, or set by a foreign process: a ``UserLock`` always
sets ``PX``) used to keep every HTTP write of that user at 503 (``Retry-After: 60``) for ever: a request's
bounded first wait never took it, and only the background waiters overtook it (writing beside whoever
set it). Now the first waiter that sees such a key gives it ``lock_ms`` (only while it still has none), so it
goes by itself and the requests get in after it, answering 503 meanwhile with the key's true time left. A live
``UserLock`` holder's key is never given another expiry. Here the test is that other process: it sets the key
itself, with the README's key layout, and sends the requests through the API (``test_lock_contention_http``'s
app: first waits bounded at 0.5 s). Real Redis (the test's DB), the bundled embedder and NER model.
"""

from __future__ import annotations

import logging
import math
import time
import uuid

import pytest
import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.user_lock import UserLock
from tests import test_lock_contention_http
from tests.test_lock_contention_http import (
    HOLDER,
    MEMORIES,
    WAIT_S,
    Client,
    _memory,
    _send,
    foreign_key_without_expiry,
    lock_key,
)

api = test_lock_contention_http.api  # fixture: one app for the module, requests' first waits bounded at WAIT_S
LOCK_MS = 60_000  # agtos's lock_ms (the README's "60 s expiry")
SHORT_LOCK_MS = 1_500  # the memories lock's lock_ms where the test waits for the key to go
EDIT = {"text": "User drinks black tea every morning"}


def _user() -> str:
    return f"noexp-{uuid.uuid4().hex[:8]}"


def test_a_foreign_key_without_expiry_is_given_lock_ms_and_the_503_says_the_time_left(
    api: Client, raw_redis: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The first request behind a key without expiry answers 503 (nothing written) with ``Retry-After`` at most
    60, and the key now expires within 60 000 ms, holding the same token; one warning names the key.
    Before the fix: PTTL stayed -1 (the key never went, every request 503 for ever)."""
    client, prefix, _ = api
    u, mid, key = foreign_key_without_expiry(client, prefix, raw_redis)
    caplog.set_level(logging.WARNING, logger="agtos.storage.user_lock")
    try:
        refused, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", EDIT))
        left_ms = raw_redis.pttl(key)
        holding = raw_redis.get(key)
    finally:
        raw_redis.delete(key)
    assert refused.status_code == 503, refused.text
    assert 0 < left_ms <= 60_000, left_ms
    assert holding == HOLDER.encode()  # given an expiry, not taken over
    retry_after = int(refused.headers["retry-after"])
    assert math.ceil(left_ms / 1000) <= retry_after <= 60, (retry_after, left_ms)
    assert refused.json()["message"].endswith(f"try again in {retry_after} s"), refused.json()
    warned = [r.getMessage() for r in caplog.records if "had no expiry" in r.getMessage()]
    assert len(warned) == 1 and key in warned[0], warned
    assert client.get(f"{MEMORIES}/{mid}", headers={"X-User-Id": u}).json()["text"] == (
        "User drinks green tea every morning"
    )


def test_once_the_key_it_gave_an_expiry_has_gone_the_same_request_goes_through(
    api: Client, raw_redis: redis.Redis
) -> None:
    """With the memories lock's ``lock_ms`` at 1.5 s: 503 first (the key given 1.5 s), ``Retry-After`` 1 or 2;
    once the key expired by itself the same PUT answers 200 and the edit is stored. Before the fix the key
    stayed (PTTL -1) and the second request answered 503 again."""
    client, prefix, coordinator = api
    u, mid, key = foreign_key_without_expiry(client, prefix, raw_redis)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(coordinator.services.semantic.versions.lock, "lock_ms", SHORT_LOCK_MS)
            refused, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", EDIT))
            assert refused.status_code == 503, refused.text
            assert refused.headers["retry-after"] in ("1", "2"), refused.headers
            deadline = time.monotonic() + 5
            while raw_redis.exists(key) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert raw_redis.exists(key) == 0, raw_redis.pttl(key)  # gone by itself
            edited, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", EDIT))
    finally:
        raw_redis.delete(key)
    assert edited.status_code == 200, edited.text
    assert client.get(f"{MEMORIES}/{mid}", headers={"X-User-Id": u}).json()["text"] == EDIT["text"]


def test_a_live_userlock_holders_key_keeps_its_expiry_and_the_request_503s(api: Client, raw_redis: redis.Redis) -> None:
    """A ``UserLock`` (another process's, ``lock_ms`` 6 s) holds the memories lock: the request answers 503
    with ``Retry-After`` at most 6, the holder keeps its token and its key's expiry runs on (never given
    the request's 60 s: PTTL at most 6 000 ms and not above what it was before the request)."""
    client, prefix, coordinator = api
    u = _user()
    mid = _memory(client, u, "User drinks green tea every morning")["id"]
    key = lock_key(prefix, u, "writers", "memories")
    holder = UserLock(coordinator.services.connector, GlobalKeys(prefix), "writers", lock_ms=6_000)
    with holder.held(u, "memories"):
        token = raw_redis.get(key)
        before_ms = raw_redis.pttl(key)
        refused, _ = _send(client, u, ("PUT", f"{MEMORIES}/{mid}", EDIT))
        after_ms = raw_redis.pttl(key)
        assert raw_redis.get(key) == token
    assert refused.status_code == 503, refused.text
    assert 0 < after_ms <= before_ms <= 6_000, (before_ms, after_ms)
    assert before_ms - after_ms >= (WAIT_S - 0.1) * 1000, (before_ms, after_ms)  # it ran on through the wait
    assert 1 <= int(refused.headers["retry-after"]) <= 6, refused.headers
    assert raw_redis.exists(key) == 0  # the holder released it
