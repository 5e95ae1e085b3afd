"""A lock of one user's named thing across processes (API processes, queue workers, threads).

A ``SET NX PX`` key under the user's keys (so tenant- and user-prefixed: ``<prefix>:user:<id>:<kind>:<name>``)
holding a random token; only its holder releases it (a compare-and-delete script), and a holder that
dies lets it expire after ``lock_ms``. A waiter polls every ``POLL_S`` for at most ``lock_ms``: by then
the holder's lock has expired, so there is no deadlock, and a holder that overran its time is overtaken.
:func:`try_held` is the same lock on any key without the wait (the BM25 index's upgrade lock).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

#: how long a holder keeps it at most; a waiter waits as long
LOCK_MS = 60_000
POLL_S = 0.02

# KEYS: the lock; ARGV: the holder's token. Deletes it only while that holder has it.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def release(connector: RedisConnector, key: str, token: str) -> None:
    """Delete the lock ``key`` only while ``token`` (its holder's) is in it."""
    connector.run(lambda r: r.eval(_RELEASE_LUA, 1, key, token))


@contextmanager
def try_held(connector: RedisConnector, key: str, lock_ms: int) -> Iterator[str | None]:
    """Take the lock ``key`` if it is free, without waiting: yields the holder's token (released on exit,
    and what a holder renewing the lock compares with), or None while another holds it."""
    token = secrets.token_hex(8)
    if not connector.run(lambda r: r.set(key, token, nx=True, px=lock_ms)):
        yield None
        return
    try:
        yield token
    finally:
        release(connector, key, token)


class UserLock:
    """One holder at a time of a user's ``kind`` lock named ``name`` (see the module)."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, kind: str, lock_ms: int = LOCK_MS) -> None:
        self.connector = connector
        self.keys = keys
        self.kind = kind
        self.lock_ms = lock_ms

    @contextmanager
    def held(self, user_id: str, name: str) -> Iterator[None]:
        """Hold the lock, waiting while another holds it (at most ``lock_ms``, after which that
        holder's lock has expired). ``StorageUnavailable`` when Redis is down."""
        key = self.keys.user(user_id).record(self.kind, name)
        token = secrets.token_hex(8)
        deadline = time.monotonic() + self.lock_ms / 1000
        while not self.connector.run(lambda r: r.set(key, token, nx=True, px=self.lock_ms)):
            if time.monotonic() > deadline:
                break  # a stuck holder: its lock is past its time, as ours will be
            time.sleep(POLL_S)
        try:
            yield
        finally:
            release(self.connector, key, token)
