"""One end at a time per live session, across API processes and the idle sweeper.

An end reads the session's journal, stores (inline) or queues (queue mode) what it read, then
clears exactly that. Two ends of one session overlapping there both read the turns the first had
not cleared yet and stored them twice, as two episodes (probe of ``agtos serve``: 4 appending and
2 ending clients, 60 turns, 61-64 taken into episodes). The lock is a ``SET NX PX`` key with a
random token, released only by its holder; a holder that dies lets it expire.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

KIND = "ending"
#: how long a holder keeps it at most (an inline end stores its episode within it); a waiter waits as long
LOCK_MS = 60_000
POLL_S = 0.02

# KEYS: the lock; ARGV: the holder's token. Deletes it only while that holder has it.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class SessionEndLock:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, lock_ms: int = LOCK_MS) -> None:
        self.connector = connector
        self.keys = keys
        self.lock_ms = lock_ms

    @contextmanager
    def held(self, user_id: str, session_id: str) -> Iterator[None]:
        """Hold the session's end lock, waiting while another end holds it (at most ``lock_ms``,
        after which that holder's lock has expired). ``StorageUnavailable`` when Redis is down."""
        key = self.keys.user(user_id).record(KIND, session_id)
        token = secrets.token_hex(8)
        deadline = time.monotonic() + self.lock_ms / 1000
        while not self.connector.run(lambda r: r.set(key, token, nx=True, px=self.lock_ms)):
            if time.monotonic() > deadline:
                break  # a stuck holder: its lock is past its time, as ours will be
            time.sleep(POLL_S)
        try:
            yield
        finally:
            self.connector.run(lambda r: r.eval(_RELEASE_LUA, 1, key, token))
