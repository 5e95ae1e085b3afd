"""A waiter for a user's lock outside a request never writes beside a live holder (issue 15, c5).

``UserLock.held`` (the writers' and conclusions' locks of workers, Dreamer runs, session ends and a request's
later locks) used to overtake whoever held the lock once it had waited ``lock_ms``: meant for a stuck holder,
it also overtook live ones, when other processes took the lock in turn all the while (a starved waiter) or a
key expired later than ``lock_ms``. Now it takes the lock only when it is free; each new holder's token
starts its ``lock_ms`` afresh and a starved wait logs a warning each ``lock_ms``. A key without expiry (legacy
or foreign: it would never go) is no longer overtaken: the first waiter gives it ``lock_ms`` (issue 15, e1)
and gets in once it expired.
Here the test plays the other processes on real Redis (the test's DB), with the README's key layout and a
short ``lock_ms``; the waiter is the storage API's ``UserLock`` (the HTTP case is in
``test_lock_contention_http.py``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from itertools import pairwise

import pytest
import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import UserLock
from tests import test_query_ingest

LOCK_MS = 400  # the waiter's lock_ms here (60 s in agtos)
LOGGER = "agtos.storage.user_lock"

# KEYS: the lock; ARGV: the holder's token, the next holder's, the next one's PX (0: no expiry).
# The next holder takes it over from the holder atomically: the lock is never free between them.
_HAND_ON_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '0' then redis.call('SET', KEYS[1], ARGV[2]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
"""
_RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class HoldersInTurn(threading.Thread):
    """Other processes holding ``key`` one after another: ``count`` holders (tokens ``holder-<i>``), each
    for ``hold_s`` (its work) with a key of ``px_ms`` (None: no expiry), the next taking it over from the
    one before; the last releases it after its ``hold_s`` (``release_last``) or keeps it. ``last_from``: just
    before the last holder took it (a lower bound: a waiter sees it later); ``releasing_at``: just before it
    released it (nobody else may have had it till then)."""

    def __init__(
        self, raw: redis.Redis, key: str, count: int, hold_s: float, px_ms: int | None, release_last: bool = True
    ) -> None:
        super().__init__(daemon=True)
        self.raw, self.key, self.hold_s, self.px_ms, self.release_last = raw, key, hold_s, px_ms, release_last
        self.tokens = [f"holder-{i}" for i in range(count)]
        self.taken = threading.Event()
        self.last_from = 0.0
        self.releasing_at = 0.0
        self.handed_on = 0

    def run(self) -> None:
        self.last_from = time.monotonic()
        assert self.raw.set(self.key, self.tokens[0], nx=True, px=self.px_ms)
        self.taken.set()
        for holder, following in pairwise(self.tokens):
            time.sleep(self.hold_s)  # the holder's work
            taking = time.monotonic()  # before the call: its reply may come late on a loaded machine
            self.handed_on += int(self.raw.eval(_HAND_ON_LUA, 1, self.key, holder, following, self.px_ms or 0))
            self.last_from = taking
        if not self.release_last:
            return
        time.sleep(self.hold_s)
        self.releasing_at = time.monotonic()
        self.raw.eval(_RELEASE_LUA, 1, self.key, self.tokens[-1])

    def __enter__(self) -> HoldersInTurn:
        self.start()
        assert self.taken.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.join(30)
        assert not self.is_alive()
        assert self.handed_on == len(self.tokens) - 1  # each took the lock over from the one before


connector = test_query_ingest.connector  # fixture: a RedisConnector on the test's Redis DB


@pytest.fixture
def lock(connector: RedisConnector, key_prefix: str) -> UserLock:
    return UserLock(connector, GlobalKeys(key_prefix), "writers", lock_ms=LOCK_MS)


def _key(prefix: str) -> str:
    """The README's key of user ``wes``'s memory writers' lock."""
    return f"{prefix}:u:{{wes}}:writers:memories"


def _entered(lock: UserLock, raw: redis.Redis, key: str, timeout_s: float = 20.0) -> tuple[float, bytes | None]:
    """Wait for the lock as a worker would (on a thread, so a wait that never ends fails the test): when
    the waiter got in, and whose token the key held then."""
    got: list[tuple[float, bytes | None]] = []

    def wait() -> None:
        with lock.held("wes", "memories"):
            got.append((time.monotonic(), raw.get(key)))

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    assert got, f"the waiter did not get in within {timeout_s} s"
    return got[0]


def _warnings(caplog: pytest.LogCaptureFixture, word: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and word in r.getMessage()]


def test_a_waiter_starved_by_holders_in_turn_writes_only_after_the_last_released(
    lock: UserLock, raw_redis: redis.Redis, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Six holders of 0.25 s each (keys of ``PX lock_ms``, as a UserLock sets them), 1.5 s in all: the waiter
    gets in only after the last one released it, and warned of its long wait (each ``lock_ms``, not each
    poll). Before the fix it got in at 0.4 s, beside the second holder."""
    key = _key(key_prefix)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    with HoldersInTurn(raw_redis, key, count=6, hold_s=0.25, px_ms=LOCK_MS) as holders:
        began = time.monotonic()  # the wait begins after this
        entered, holding = _entered(lock, raw_redis, key)
    assert entered >= holders.releasing_at, entered - holders.releasing_at
    assert holding is not None and holding.decode() not in holders.tokens, holding  # its own token
    waited = _warnings(caplog, "waited")  # at 0.4, 0.8 and 1.2 s (more if the machine is slow)
    seen = re.search(r"held by (\d+) holder", waited[-1]) if waited else None
    assert len(waited) >= 2 and seen and int(seen[1]) >= 3, waited
    assert len(waited) <= (entered - began) / (LOCK_MS / 1000) + 1, waited  # one each lock_ms
    assert raw_redis.get(key) is None  # released


def test_a_holder_whose_key_expires_after_lock_ms_is_waited_for_until_it_expires(
    lock: UserLock, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A live holder with ``PX 1200`` (three times the waiter's ``lock_ms``): the waiter gets in at its
    expiry, not at ``lock_ms`` beside it (before the fix: 0.4 s)."""
    key = _key(key_prefix)
    assert raw_redis.set(key, "longer-holder", nx=True, px=1_200)
    asked = time.monotonic()  # before PTTL is read: asked + PTTL is not after the expiry, however late the reply
    expires = asked + raw_redis.pttl(key) / 1000
    entered, holding = _entered(lock, raw_redis, key)
    assert entered >= expires - 0.05, expires - entered
    assert holding not in (None, b"longer-holder"), holding


def test_a_key_without_expiry_is_given_lock_ms_and_the_waiter_gets_in_after_it_expired(
    lock: UserLock, raw_redis: redis.Redis, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A key with no expiry (not a UserLock's: legacy or foreign) would keep every writer out for good: the
    waiter gives it ``lock_ms`` at once (one warning naming the key), never writes beside it, and gets in with
    its own token once it expired. Before: it overtook it after ``lock_ms``, beside the key's holder."""
    key = _key(key_prefix)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert raw_redis.set(key, "legacy-holder", nx=True)
    started = time.monotonic()
    entered, holding = _entered(lock, raw_redis, key)
    assert LOCK_MS / 1000 - 0.05 <= entered - started < 3.0, entered - started
    assert holding not in (None, b"legacy-holder"), holding  # its own token: the legacy key went
    assert raw_redis.get(key) is None  # released
    given = _warnings(caplog, "had no expiry")
    assert len(given) == 1 and key in given[0], given
    assert _warnings(caplog, "overtook") == []


def test_keys_without_expiry_handed_on_are_waited_for_until_the_last_expired(
    lock: UserLock, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Five holders of 0.15 s each on keys without expiry, each taking it over from the one before (the
    waiter gives each new key ``lock_ms``, longer than a holder's turn); the last
    keeps it, never releasing: the waiter gets in once that key expired, ``lock_ms`` after the last took it
    at the earliest, with its own token (before: it overtook the last, stuck one)."""
    key = _key(key_prefix)
    with HoldersInTurn(raw_redis, key, count=5, hold_s=0.15, px_ms=None, release_last=False) as holders:
        entered, holding = _entered(lock, raw_redis, key)
    assert holding is not None and holding.decode() not in holders.tokens, holding
    assert entered >= holders.last_from + LOCK_MS / 1000 - 0.05, entered - holders.last_from


def test_a_request_waits_the_readmes_10_s_for_its_first_lock() -> None:
    """The README's bound (10 s before a 503). test_lock_contention_http patches it to 0.5 s to show every route
    reads it at request time; this pins the documented value itself (a changed constant fails here)."""
    from agtos.serving import lock_waits

    assert lock_waits.REQUEST_LOCK_WAIT_S == 10.0
