"""A lock of one user's named thing across processes (API processes, queue workers, threads).

A ``SET NX PX`` key under the user's keys (so tenant- and user-prefixed: ``<prefix>:user:<id>:<kind>:<name>``)
holding a random token; only its holder releases it (a compare-and-delete script), and a holder that
dies lets it expire after ``lock_ms``. A waiter polls every ``POLL_S`` until the lock is free, so it never
writes beside a holder: while others take the lock in turn (each a new token) it waits on, logging a
warning each ``lock_ms`` it has waited, and a holder whose key expires later than ``lock_ms`` is waited
for until it expires. A key without expiry (not set by a ``UserLock``: a legacy or foreign key, which
would never go) is given ``lock_ms`` by the first waiter of any kind that sees it, atomically and only
while it still has none (one script with the waiter's take: a live ``UserLock``'s key is never touched),
with one warning naming the key: it then goes by itself like a dead holder's, and the waiters get in after it.
A waiter gives up after the process's limit (:func:`limit_waits`, ``AGTOS_LOCK_WAIT_MAX_S``) with
:class:`LockWaitTooLong`, without the lock and without writing: a queued job is handed back and retried.
An HTTP request waits less (:func:`waiting_at_most`): for the first lock it takes, before it has written
anything, at most its own bound, and then answers 503 (:class:`LockBusy`, ``Retry-After`` the seconds
left on the holder's key, ``lock_ms`` at most for a key it gave an expiry) rather than hang for a minute.
:func:`try_held` is the same lock on any key without the wait (the BM25 index's upgrade lock).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

log = logging.getLogger(__name__)

#: how long a holder keeps it at most; a waiter waits as long
LOCK_MS = 60_000
POLL_S = 0.02
#: a request's bound on its wait for its first lock (:func:`waiting_at_most`); None: the whole ``lock_ms``
_FIRST_WAIT_S: ContextVar[float | None] = ContextVar("agtos_first_lock_wait_s", default=None)
#: how long any waiter waits at most (:func:`limit_waits`); None: without end
_wait_limit_s: float | None = None


class LockBusy(RuntimeError):
    """Another holder kept a user's lock for the whole of a request's bounded wait; nothing was written.
    ``retry_after_s``: whole seconds until that holder's lock expires at the latest (at least 1)."""

    def __init__(self, what: str, retry_after_s: int) -> None:
        super().__init__(f"another writer of this user's {what} holds their lock; try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class LockWaitTooLong(LockBusy):
    """A waiter outside a request's bound waited the process's limit (:func:`limit_waits`) while live holders
    kept a user's lock, and gave up without it: nothing was written under it."""


def limit_waits(seconds: float | None) -> None:
    """Every later wait for a lock in this process gives up after ``seconds`` (None or 0: never), raising
    :class:`LockWaitTooLong` (the services set it from ``AGTOS_LOCK_WAIT_MAX_S``)."""
    global _wait_limit_s
    _wait_limit_s = seconds or None


@contextmanager
def waiting_at_most(seconds: float) -> Iterator[None]:
    """Within it (a request's work, in its own context), the first :meth:`UserLock.held` waits at most
    ``seconds`` for another holder and then raises :class:`LockBusy`; the locks taken after it (the work
    has begun writing: stopping it there would leave it half done) wait the whole ``lock_ms`` as elsewhere."""
    token = _FIRST_WAIT_S.set(seconds)
    try:
        yield
    finally:
        _FIRST_WAIT_S.reset(token)


# KEYS: the lock; ARGV: the holder's token. Deletes it only while that holder has it.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# KEYS: the lock; ARGV: the waiter's token, lock_ms. Takes the lock if it is free (1); else gives a key
# without expiry (never a UserLock's: it always sets PX) lock_ms and answers -1; else 0 (a live holder's
# key, untouched). PTTL/PEXPIRE rather than PEXPIRE NX: Redis < 7 too, and one key: a Cluster too.
_TAKE_LUA = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return -1 end
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
        """Hold the lock, waiting while another holds it (see the module: a holder's key expires after
        ``lock_ms``; a key without expiry is given ``lock_ms`` by the first waiter that sees it).
        ``StorageUnavailable`` when Redis is down; ``LockBusy`` when the wait is bounded
        (:func:`waiting_at_most`) and another holder kept the lock for all of it; ``LockWaitTooLong`` past
        the process's limit (:func:`limit_waits`)."""
        key = self.keys.user(user_id).record(self.kind, name)
        token = secrets.token_hex(8)
        bound = _FIRST_WAIT_S.get()
        if not self._taken(key, token):
            if bound is None:
                self._wait(key, token, name)
            else:
                self._wait_at_most(key, token, name, bound)
        if bound is not None:
            _FIRST_WAIT_S.set(None)  # the request writes from here on: its next locks are waited for in full
        try:
            yield
        finally:
            release(self.connector, key, token)

    def _taken(self, key: str, token: str) -> bool:
        return bool(self.connector.run(lambda r: r.set(key, token, nx=True, px=self.lock_ms)))

    def _try(self, key: str, token: str) -> bool:
        """A waiter's poll: take the lock if it is free; a key without expiry gets ``lock_ms`` (see the module)."""
        got = int(self.connector.run(lambda r: r.eval(_TAKE_LUA, 1, key, token, self.lock_ms)))
        if got == -1:
            log.warning(
                "the lock %s had no expiry (not a UserLock's key): it expires in %d ms, then writers get in",
                key,
                self.lock_ms,
            )
        return got == 1

    def _wait_at_most(self, key: str, token: str, name: str, bound: float) -> None:
        """A request's first lock: taken within ``bound`` seconds, else :class:`LockBusy` (nothing written yet,
        and the holder keeps its lock)."""
        deadline = time.monotonic() + bound
        while not self._try(key, token):
            if time.monotonic() > deadline:
                raise LockBusy(name, self._retry_after_s(key))
            time.sleep(POLL_S)

    def _wait(self, key: str, token: str, name: str) -> None:
        """Wait until the lock is taken (returns holding it); a starved wait logs a warning each ``lock_ms``,
        and past the process's limit raises ``LockWaitTooLong``."""
        wait_s = self.lock_ms / 1000
        started = time.monotonic()
        give_up_at = None if _wait_limit_s is None else started + _wait_limit_s
        warn_at = started + wait_s
        holder: bytes | str | None = None  # the token holding it when last polled
        holders = 0  # how many holders in turn this wait has seen
        while not self._try(key, token):
            seen = self.connector.run(lambda r: r.get(key))
            now = time.monotonic()
            if seen is None:  # released between the two calls: try again at once
                continue
            if seen != holder:
                holder, holders = seen, holders + 1
            if now > warn_at:
                log.warning(
                    "waited %.0f s for the lock %s, held by %d holder(s) in turn meanwhile; waiting on",
                    now - started,
                    key,
                    holders,
                )
                warn_at += wait_s
            if give_up_at is not None and now > give_up_at:
                log.warning(
                    "gave up the lock %s after %.0f s, held by %d holder(s) in turn", key, now - started, holders
                )
                raise LockWaitTooLong(name, self._retry_after_s(key))
            time.sleep(POLL_S)

    def _retry_after_s(self, key: str) -> int:
        """Whole seconds until the lock ``key`` expires (at least 1; ``lock_ms`` for a key without expiry)."""
        left_ms = int(self.connector.run(lambda r: r.pttl(key)))
        if left_ms == -1:  # no expiry yet (set again without one since the last poll): lock_ms once a poll gives it
            left_ms = self.lock_ms
        return max(1, math.ceil(left_ms / 1000))
