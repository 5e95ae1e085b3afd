"""A quiet user's read stores their own queued session ends first (queue mode, issue 14).

The app runs in queue mode with no worker at all, so an end's job stays queued unless a read of its
user catches up (``AGTOS_READ_CATCHUP_AFTER_S``, 0.2 s here): the user has no live session and their
newest queued end is older than that. Everything through HTTP, real Redis and models; the queue and
the user's keys are read raw with literal key names (README "Keys").
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user

QUIET_S = 0.2  # AGTOS_READ_CATCHUP_AFTER_S in these tests
EVIDENCE = "My sister Odalys moved to Tromsø to study glaciology."
TURNS = [
    {"role": "user", "content": EVIDENCE},
    {"role": "assistant", "content": "Tromsø is a great place for glaciology. Is Odalys enjoying it?"},
    {"role": "user", "content": "She loves it, although the polar night is long. Please remember her name."},
]
QUERY = "where did Odalys move to study glaciology"

Serve = Callable[..., tuple[TestClient, MemoryCoordinator]]


@pytest.fixture
def serve(settings: Settings) -> Iterator[Serve]:
    """An app in queue mode without any worker; ``after``: AGTOS_READ_CATCHUP_AFTER_S."""
    made: list[tuple[TestClient, MemoryCoordinator]] = []

    def build(after: Any = QUIET_S) -> tuple[TestClient, MemoryCoordinator]:
        coordinator = MemoryCoordinator(
            settings.with_overrides(ingest_mode="queue", ingest_worker=False, read_catchup_after_s=after)
        )
        client = TestClient(create_app(coordinator=coordinator))
        client.__enter__()
        made.append((client, coordinator))
        return client, coordinator

    yield build
    for client, coordinator in made:
        client.__exit__(None, None, None)
        coordinator.close()


def end(client: TestClient, who: str, session: str, turns: list[dict[str, str]] = TURNS) -> None:
    appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert appended.status_code == 200, appended.text
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text


def search(client: TestClient, who: str) -> list[dict[str, Any]]:
    found = client.get("/api/memory/search", params={"q": QUERY}, headers=user(who))
    assert found.status_code == 200, found.text
    results: list[dict[str, Any]] = found.json()["results"]
    return results


def context(client: TestClient, who: str) -> str:
    built = client.post("/api/memory/context", json={"query": QUERY, "token_budget": 1000}, headers=user(who))
    assert built.status_code == 200, built.text
    return str(built.json()["context"])


def queued_users(raw: redis.Redis, prefix: str) -> list[str]:
    """The user of each entry of the ingestion stream, oldest first."""
    entries = raw.xrange(f"{prefix}:meta:ingest-queue")
    return [json.loads(fields[b"job"])["user_id"] for _, fields in entries]


def user_keys(raw: redis.Redis, prefix: str, who: str, what: str) -> list[bytes]:
    return list(raw.scan_iter(match=f"{prefix}:u:{{{who}}}:{what}", count=1_000))


def test_a_quiet_users_search_and_context_store_their_queued_end(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, coordinator = serve()
    end(client, "ulla", "trip")
    assert queued_users(raw_redis, key_prefix) == ["ulla"]
    (listed,) = user_keys(raw_redis, key_prefix, "ulla", "ends:queued")
    assert 48 * 3600 - 60 < raw_redis.ttl(listed) <= 48 * 3600  # the session journal's TTL (48 h)
    time.sleep(QUIET_S + 0.3)
    hits = search(client, "ulla")
    assert queued_users(raw_redis, key_prefix) == []  # acked and deleted: the worker never reads it
    assert user_keys(raw_redis, key_prefix, "ulla", "ends:queued") == []
    assert [hit["sessionId"] for hit in hits] == ["trip"]
    assert EVIDENCE in [highlight["text"] for highlight in hits[0]["highlights"]]
    assert EVIDENCE in context(client, "ulla")
    health = client.get("/health").json()["checks"]["ingest-queue"]
    assert health["caughtUp"] == 1 and health["done"] == 1, health
    # a worker started now finds nothing of it; one episode
    assert coordinator.ingest_worker().drain() == 0
    assert len(user_keys(raw_redis, key_prefix, "ulla", "episode:ep-*")) == 1


def test_another_users_queued_end_stays_queued(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    """U's read stores U's end only; V's stays for the worker, which unlists it once done."""
    client, coordinator = serve()
    end(client, "vera", "trip")
    end(client, "ulla", "trip")
    time.sleep(QUIET_S + 0.3)
    assert [hit["sessionId"] for hit in search(client, "ulla")] == ["trip"]
    assert queued_users(raw_redis, key_prefix) == ["vera"]
    assert user_keys(raw_redis, key_prefix, "vera", "episode:*") == []
    assert len(user_keys(raw_redis, key_prefix, "vera", "ends:queued")) == 1
    assert coordinator.ingest_worker().drain() == 1
    assert len(user_keys(raw_redis, key_prefix, "vera", "episode:ep-*")) == 1
    assert user_keys(raw_redis, key_prefix, "vera", "ends:queued") == []


def test_a_read_while_another_catch_up_of_the_user_runs_answers_at_once(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """One catch-up per user at a time: while its lock is held, a read answers from what is stored."""
    client, _ = serve()
    end(client, "ulla", "trip")
    lock = f"{key_prefix}:u:{{ulla}}:read-catchup:lock"
    raw_redis.set(lock, "another-reader", px=30_000)
    time.sleep(QUIET_S + 0.3)
    started = time.monotonic()
    assert search(client, "ulla") == []
    assert time.monotonic() - started < 5.0  # no wait for the lock (it has 30 s left)
    assert queued_users(raw_redis, key_prefix) == ["ulla"]
    raw_redis.delete(lock)
    assert [hit["sessionId"] for hit in search(client, "ulla")] == ["trip"]


def test_a_failed_catch_up_fails_neither_the_read_nor_the_job(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The ingestion raises: the read answers 200 from what is stored, the entry stays queued for the
    worker (not acked), and the worker then stores it."""
    client, coordinator = serve()
    end(client, "ulla", "trip")

    def broken(jobs: list[Any]) -> None:
        raise RuntimeError("embedder exploded")

    coordinator.sessions.read_catchup.handle_many = broken
    time.sleep(QUIET_S + 0.3)
    assert search(client, "ulla") == []
    assert queued_users(raw_redis, key_prefix) == ["ulla"]
    assert len(user_keys(raw_redis, key_prefix, "ulla", "ends:queued")) == 1
    assert coordinator.ingest_worker().drain() == 1
    assert [hit["sessionId"] for hit in search(client, "ulla")] == ["trip"]


def test_a_user_with_a_live_session_is_not_caught_up(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    client, _ = serve()
    end(client, "ulla", "trip")
    talking = {"turns": [{"role": "user", "content": "Next week I am flying to Bergen."}]}
    assert client.post("/api/memory/sessions/now/turns", json=talking, headers=user("ulla")).status_code == 200
    time.sleep(QUIET_S + 0.3)
    assert search(client, "ulla") == []
    assert EVIDENCE not in context(client, "ulla")
    assert queued_users(raw_redis, key_prefix) == ["ulla"]


@pytest.mark.parametrize(("after", "wait_s"), [(30.0, QUIET_S + 0.3), ("off", QUIET_S + 0.3), (-1, QUIET_S + 0.3)])
def test_a_fresh_end_or_the_setting_off_is_not_caught_up(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str, after: Any, wait_s: float
) -> None:
    """An end fresher than AGTOS_READ_CATCHUP_AFTER_S (30 s) stays for the worker; ``off`` or a
    negative value: never."""
    client, _ = serve(after)
    end(client, "ulla", "trip")
    time.sleep(wait_s)
    assert search(client, "ulla") == []
    assert queued_users(raw_redis, key_prefix) == ["ulla"]


def test_forget_all_before_the_read_leaves_nothing_to_store(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, _ = serve()
    end(client, "ulla", "trip")
    forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("ulla"))
    assert forgot.status_code == 200, forgot.text
    # the queued-ends set went with the rest: no key anywhere names the user
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:*ulla*", count=1_000)) == []
    time.sleep(QUIET_S + 0.3)
    assert search(client, "ulla") == []
    assert user_keys(raw_redis, key_prefix, "ulla", "episode:*") == []
    assert user_keys(raw_redis, key_prefix, "ulla", "turns:*") == []
    assert queued_users(raw_redis, key_prefix) == []


def test_an_end_a_starved_worker_holds_is_caught_up_and_stored_once(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A worker took the entry (it is in its pending list) and stalls (at idle priority under load): the
    read stores it anyway; when the worker runs it after all, the job is idempotent: one episode, the
    same id, and the queue counts it done once."""
    client, coordinator = serve()
    end(client, "ulla", "trip")
    taken, go = threading.Event(), threading.Event()
    worker = coordinator.ingest_worker()
    ingest = worker.handle

    def starved(job: Any) -> None:
        taken.set()
        go.wait(60)
        ingest(job)

    worker.handle = starved
    stalled = threading.Thread(target=worker.run_once, kwargs={"block": False})
    stalled.start()
    try:
        assert taken.wait(30)
        time.sleep(QUIET_S + 0.3)
        before = [hit["id"] for hit in search(client, "ulla")]
        assert len(before) == 1 and queued_users(raw_redis, key_prefix) == []
    finally:
        go.set()
        stalled.join(60)
    assert [hit["id"] for hit in search(client, "ulla")] == before
    assert len(user_keys(raw_redis, key_prefix, "ulla", "episode:ep-*")) == 1
    health = client.get("/health").json()["checks"]["ingest-queue"]
    assert (health["done"], health["caughtUp"], health["depth"]) == (1, 1, 0), health


def test_an_end_caught_up_while_the_worker_waited_to_run_it_is_not_run_again(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The worker read the entry and waits before its run (it yields to busy requests, or is starved):
    a quiet user's read stores it meanwhile; the worker then finds it gone and does not ingest it again."""
    client, coordinator = serve()
    end(client, "ulla", "trip")
    go, runs = threading.Event(), []
    worker = coordinator.ingest_worker().yield_to(lambda: not go.is_set(), 60)
    ingest = worker.handle
    worker.handle = lambda job: (runs.append(job), ingest(job))
    waiting = threading.Thread(target=worker.run_once, kwargs={"block": False})
    waiting.start()
    try:
        time.sleep(QUIET_S + 0.3)
        pending = raw_redis.xpending(f"{key_prefix}:meta:ingest-queue", "ingest-workers")
        assert pending["pending"] == 1  # the worker holds it
        assert [hit["sessionId"] for hit in search(client, "ulla")] == ["trip"]
    finally:
        go.set()
        waiting.join(60)
    assert runs == []
    assert raw_redis.xpending(f"{key_prefix}:meta:ingest-queue", "ingest-workers")["pending"] == 0
    health = client.get("/health").json()["checks"]["ingest-queue"]
    assert (health["done"], health["caughtUp"], health["depth"]) == (1, 1, 0), health


def test_a_long_catch_up_answers_the_read_in_time_and_goes_on(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On busy cores a user's backlog takes 10-20 s to store, past the 5 s timeout of common HTTP clients:
    the read waits ``READ_WAIT_S`` at most and answers from what is stored; the catch-up goes on and a
    later read finds the session. A read during it joins the same catch-up (the ingestion runs once)."""
    import agtos.memory.read_catchup as read_catchup

    monkeypatch.setattr(read_catchup, "READ_WAIT_S", 0.3)
    client, coordinator = serve()
    end(client, "ulla", "trip")
    catch_up = coordinator.sessions.read_catchup
    ingest, runs = catch_up.handle_many, []

    def slow(jobs: list[Any]) -> None:
        runs.append(len(jobs))
        time.sleep(2.0)
        ingest(jobs)

    catch_up.handle_many = slow
    time.sleep(QUIET_S + 0.3)
    started = time.monotonic()
    assert search(client, "ulla") == []  # answered before the 2 s ingestion ended
    assert search(client, "ulla") == []  # joins the running catch-up: no second one
    assert time.monotonic() - started < 1.8
    deadline = time.monotonic() + 20
    while queued_users(raw_redis, key_prefix) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.2)  # the thread's last step: the user's set unlisted after the ack
    assert runs == [1]
    assert [hit["sessionId"] for hit in search(client, "ulla")] == ["trip"]
    assert EVIDENCE in context(client, "ulla")
