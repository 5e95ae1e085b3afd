"""Planted bugs in the lock-wait limit (f67706e) and the entity-vector check (2a68309) that their owners' tests let
through (issue 20, d6).

Each test names the planted bug it kills (docs/testing.md, "Planted bugs in the lock-wait limit and the
entity-vector check"). Real Redis (the test's DB); expected values are the README's and the docstrings'
literals: ``AGTOS_LOCK_WAIT_MAX_S`` (0: waits without end), ``LockWaitTooLong`` (a ``LockBusy``, its
``retry_after_s`` the holder's time left), and a job given up for a lock handed back after the retry delay
without its delivery counted; a removed entity loses its pending-vector note at once (pending_vectors).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from agtos.memory.ingest_worker import IngestWorker, SessionJob
from agtos.storage.ingest_queue import GROUP, IngestQueue
from agtos.storage.keys import GlobalKeys
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.user_lock import LockBusy, LockWaitTooLong, UserLock, limit_waits
from tests import test_entity_rename_race, test_env_settings, test_query_ingest
from tests.helpers import user
from tests.test_entity_rename_race import BOUND_S, FIRST, GATE_S, acme_of, gated_vector_write, rename, while_held
from tests.test_entity_writers_race import Process
from tests.test_env_settings import Serve
from tests.test_ingest_queue import KEYBOARD

connector = test_query_ingest.connector  # fixture: a RedisConnector on the test's Redis DB
env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve
processes = test_entity_rename_race.processes  # two API processes over one Redis (module-scoped)

HOLDER = "other-process"


@pytest.fixture(autouse=True)
def _unlimited_after() -> Iterator[None]:
    """The limit is process-wide: later tests of this process get none."""
    yield
    limit_waits(None)


@pytest.fixture
def lock(connector: RedisConnector, key_prefix: str) -> UserLock:
    """A UserLock as agtos builds it (``lock_ms`` 60 s)."""
    return UserLock(connector, GlobalKeys(key_prefix), "writers")


def _held(raw_redis: redis.Redis, prefix: str, px: int) -> str:
    """Another process holds user ``wes``'s memory writers' lock (README's key) for ``px`` ms."""
    key = f"{prefix}:u:{{wes}}:writers:memories"
    assert raw_redis.set(key, HOLDER, nx=True, px=px)
    return key


def test_a_limit_of_0_waits_without_end(serve: Serve, lock: UserLock, raw_redis: redis.Redis, key_prefix: str) -> None:
    """README: ``AGTOS_LOCK_WAIT_MAX_S=0`` waits without end. The app is built with it (the setting is valid);
    a writer behind a holder whose lock expires 0.7 s later then takes the lock after it expired, no give-up.
    Bugs caught: 0 taken as "no wait" (gives up at the first poll), the setting refusing 0 (``gt=0``)."""
    with serve(AGTOS_LOCK_WAIT_MAX_S="0"):
        key = _held(raw_redis, key_prefix, 700)
        started = time.monotonic()
        with lock.held("wes", "memories"):
            assert raw_redis.get(key) != HOLDER.encode()  # ours now
        assert time.monotonic() - started >= 0.5


def test_a_wait_gives_up_after_the_limit_with_the_holders_time_left(
    lock: UserLock, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """``limit_waits(1)`` (``AGTOS_LOCK_WAIT_MAX_S=1``); a live holder keeps the lock for 600 s. The wait
    gives up after 1 s (not before, and long before the holder's 60 s ``lock_ms``) with ``LockWaitTooLong``, a
    ``LockBusy`` (a request answers 503) whose ``retry_after_s`` is the holder's time left (590–600 s); the
    lock stays the holder's.
    Bugs caught: the limit read as ms (gives up at once), counted from the first warning (``lock_ms`` later),
    ``LockWaitTooLong`` not a ``LockBusy``, its Retry-After 1."""
    limit_waits(1.0)
    key = _held(raw_redis, key_prefix, 600_000)
    started = time.monotonic()
    try:
        with pytest.raises(LockBusy) as refused, lock.held("wes", "memories"):
            pytest.fail("took a lock a live holder keeps")
        elapsed = time.monotonic() - started
    finally:
        assert raw_redis.get(key) == HOLDER.encode()
        raw_redis.delete(key)
    assert type(refused.value) is LockWaitTooLong
    assert 1.0 <= elapsed < 20.0, elapsed
    assert 590 <= refused.value.retry_after_s <= 600, refused.value.retry_after_s


def test_a_session_end_behind_a_live_holder_answers_503_after_the_limit(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Inline ingestion, ``AGTOS_LOCK_WAIT_MAX_S=1``; another process holds Wes's writers' locks for 600 s.
    ``POST …/end`` (it keeps the whole wait: no request bound) answers 503 (lock_waits: ``LockWaitTooLong`` is
    a ``LockBusy``) with ``Retry-After`` the holder's time left (590–600 s, in its message too), no memory
    written. After the release the same end answers 200 and the memories are there.
    Bugs caught: ``LockWaitTooLong`` not a ``LockBusy`` (500), its Retry-After 1."""
    held = [f"{key_prefix}:u:{{wes}}:writers:{name}" for name in ("memories", "entities")]
    with serve(AGTOS_LOCK_WAIT_MAX_S="1") as client:
        appended = client.post("/api/memory/sessions/chat/turns", json={"turns": KEYBOARD}, headers=user("wes"))
        assert appended.status_code == 200, appended.text
        for key in held:
            assert raw_redis.set(key, HOLDER, nx=True, px=600_000)
        try:
            refused = client.post("/api/memory/sessions/chat/end", headers=user("wes"))
            assert [raw_redis.get(key) for key in held] == [HOLDER.encode()] * 2
        finally:
            raw_redis.delete(*held)
        assert refused.status_code == 503, refused.text
        retry_after = int(refused.headers["retry-after"])
        assert 590 <= retry_after <= 600 and refused.json()["message"].endswith(f"try again in {retry_after} s")
        memories = client.get("/api/memory/memories", headers=user("wes"))
        assert memories.json()["memories"] == [], memories.text
        ended = client.post("/api/memory/sessions/chat/end", headers=user("wes"))
        assert ended.status_code == 200, ended.text
        assert client.get("/api/memory/memories", headers=user("wes")).json()["memories"] != []


def _queued(connector: RedisConnector, key_prefix: str) -> IngestQueue:
    """An ingest queue holding one job (an empty session of ``wes``)."""
    queue = IngestQueue(connector, GlobalKeys(key_prefix))
    queue.enqueue(SessionJob(user_id="wes", session_id="s1", segment="s1", turns=[]).model_dump_json().encode())
    return queue


def _failing(
    queue: IngestQueue, raw_redis: redis.Redis, failures: list[Exception | None]
) -> tuple[Callable[[SessionJob], None], list[int]]:
    """A job handler raising ``failures`` in turn (None: done), and the deliveries it saw (XPENDING's count)."""
    seen: list[int] = []

    def handle(_: SessionJob) -> None:
        [pending] = raw_redis.xpending_range(queue.stream, GROUP, min="-", max="+", count=1)
        seen.append(int(pending["times_delivered"]))
        failure = failures[len(seen) - 1]
        if failure is not None:
            raise failure

    return handle, seen


def test_a_give_up_keeps_the_delivery_count_the_job_had(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """``AGTOS_INGEST_MAX_ATTEMPTS=3``, no retry delay: a job fails (counted), gives up for a lock twice (not
    counted), then fails twice more. Its deliveries are 1, 2, 2, 2, 3 (each give-up's delivery taken back),
    and at the 3rd counted failure it is dead-lettered with deliveries 3; nothing is left to run.
    Bugs caught: the uncounted delivery one too low (``uncount`` or ``RETRYCOUNT`` less 1: the count goes
    down), every failure uncounted, ``JUSTID`` dropped (a hand-back counted too), the hand-back's idle time
    the delay instead of ``claim_idle - delay`` (the job not claimable again)."""
    queue = _queued(connector, key_prefix)
    busy = LockWaitTooLong("memories", 30)
    handle, seen = _failing(queue, raw_redis, [RuntimeError("a"), busy, busy, RuntimeError("b"), RuntimeError("c")])
    worker = IngestWorker(queue, handle, max_attempts=3, retry_delay_s=0.0, claim_idle_s=120.0)
    assert [worker.run_once(block=False) for _ in range(6)] == [1, 1, 1, 1, 1, 0]
    assert seen == [1, 2, 2, 2, 3]
    [dead] = queue.dead_letters()
    assert (dead["deliveries"], dead["error"]) == ("3", "RuntimeError: c")


def test_a_job_given_up_for_a_lock_waits_the_retry_delay(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """``AGTOS_INGEST_RETRY_DELAY_S=1``: a job that gave up for a lock is not run again at once, 1.5 s later it
    is (and done: the queue empty, no dead letter).
    Bug caught: the give-up's hand-back without the retry delay (claimable at once)."""
    queue = _queued(connector, key_prefix)
    handle, seen = _failing(queue, raw_redis, [LockWaitTooLong("memories", 30), None])
    worker = IngestWorker(queue, handle, max_attempts=1, retry_delay_s=1.0, claim_idle_s=120.0)
    assert worker.run_once(block=False) == 1
    assert worker.run_once(block=False) == 0  # handed back, claimable after the delay
    time.sleep(1.5)
    assert worker.run_once(block=False) == 1
    assert seen == [1, 1]
    assert raw_redis.xlen(queue.stream) == 0 and queue.dead_letters() == []


def test_an_entity_deleted_before_its_renames_vector_landed_waits_for_no_vector(
    processes: tuple[Process, Process],
) -> None:
    """Process 1's rename has written the name and waits before its vector; process 2 deletes the entity; the
    vector then lands and goes again, and no note that the entity waits for a vector is left (pending_vectors:
    a record deleted loses its note at once; the repair sweep would embed a name no entity has).
    Bug caught: a removed entity's vector dropped by ``_name_vector(None)`` (queued for repair)."""
    one, two = processes
    who = "planted-d6-del"
    acme = acme_of(one, who)

    def delete() -> int:
        assert gate.started.wait(BOUND_S), "the rename never wrote its vector"
        return two.client.delete(f"/api/entities/{acme}", headers=user(who)).status_code

    with gated_vector_write(one, acme) as gate, ThreadPoolExecutor(2) as pool:
        renamed = pool.submit(rename, one, who, acme, FIRST)
        assert while_held(gate.started, gate.opened, renamed, pool.submit(delete)) == 200
        assert renamed.result(GATE_S) == 200
    services = one.coordinator.services
    assert PendingVectors(services.connector, services.keys).count_of(who) == 0
