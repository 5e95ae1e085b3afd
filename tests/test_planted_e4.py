"""Survivors of the bugs planted in this session's changes (issue 20, e4): the key check with its rate-limit
token in one script (b37433d), and the Dreamer's "dream pending" mark retried by the maintenance sweep
(d6d0b76). Each test failed with its bug planted and passes without (docs/testing.md, "Planted bugs in this
session's changes"). Real Redis (the test's DB), through the HTTP app where the behaviour is reachable there;
expected values are literals from the README and the docstrings (a token per 1 / rate seconds, Retry-After
in whole seconds rounded up, a memo of at most 256 values).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import LLMSlot, MaintenanceConfig, Settings
from agtos.memory import dream_retry
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.dreamer_pipeline import run_dreamer
from agtos.memory.resource_guard import Policy
from agtos.serving import strict_json
from agtos.serving.app import create_app
from benchmarks.round_trips import RoundTrips
from tests.helpers import end_session, run_maintenance, user
from tests.stub_servers import StubModelServer
from tests.test_auth import AppFor, app_for, bearer, store_of  # noqa: F401 - app_for: a fixture
from tests.test_dream_pending import _given_up, deferred  # noqa: F401 - deferred: a fixture
from tests.test_read_catchup import QUERY, QUIET_S, Serve, end, queued_users, search, serve, user_keys  # noqa: F401

TURN = {"turns": [{"role": "user", "content": "My locker code is 4711."}]}
TURNS = "/api/memory/sessions/{}/turns"
NO_WAITS = MaintenanceConfig(guard_retries=0, guard_delay_s=0.0)
CLOUD = LLMSlot(provider="openai", model="gpt-4o-mini", base_url="https://api.openai.example/v1")


# --- the key check and its token (b37433d) -----------------------------------------------------------


def test_a_rate_limited_append_is_one_round_trip_with_the_buckets_own_retry_after(
    app_for: AppFor,  # noqa: F811
    raw_redis: redis.Redis,
) -> None:
    """``AGTOS_RATE_LIMIT_PER_S=0.25``, burst 1: a token every 4 s. The first append takes it: the key's bucket
    is ``<prefix>:{auth}:bucket:<key id>`` and goes once it would be full again (4 s, not ~1 s: a TTL in
    seconds read as ms). The second is a 429 with ``Retry-After: 4`` (whole seconds, rounded up: not 3), after
    one round trip, the key check's script (no second token taken by the limiter after a refusal)."""
    client = app_for(rate_limit_per_s=0.25, rate_limit_burst=1)
    key, record = store_of(client).create("user", "tara")
    trips = RoundTrips(client.app.state.coordinator.connector.client)  # type: ignore[attr-defined]
    assert client.post(TURNS.format("s1"), json=TURN, headers=bearer(key)).status_code == 200
    prefix = client.app.state.coordinator.keys.prefix  # type: ignore[attr-defined]
    left_ms = raw_redis.pttl(f"{prefix}:{{auth}}:bucket:{record.id}")
    assert 3_000 < left_ms <= 5_000, left_ms  # 4 s to refill, and the script's 1 s slack
    trips.sent.clear()

    refused = client.post(TURNS.format("s1"), json=TURN, headers=bearer(key))

    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "4"
    assert refused.json()["message"].endswith("retry in 4 s"), refused.json()
    assert trips.sent == ["EVALSHA"]


def test_a_bucket_refills_within_the_second(app_for: AppFor, raw_redis: redis.Redis) -> None:  # noqa: F811
    """``AGTOS_RATE_LIMIT_PER_S=10``, burst 1: a token every 0.1 s. Three times, just after a second of the
    Redis clock begins: the key takes its token, and 0.3 s later (3 tokens' time, still within that second)
    it is served again. (Planted: the script's clock with whole-second resolution: no refill until the
    second turns, a 429.)"""
    client = app_for(rate_limit_per_s=10.0, rate_limit_burst=1)
    key, _ = store_of(client).create("user", "yara")
    for attempt in range(3):
        _, micros = raw_redis.time()
        time.sleep((1_050_000 - micros) / 1e6)  # 50 ms into the next second
        first = client.post(TURNS.format("s1"), json=TURN, headers=bearer(key))
        time.sleep(0.3)
        again = client.post(TURNS.format("s1"), json=TURN, headers=bearer(key))
        assert (first.status_code, again.status_code) == (200, 200), (attempt, again.text)


def test_the_charset_memo_holds_at_most_256_short_values(client: TestClient) -> None:
    """The ``Content-Type`` charsets are memoised, at most 256 values of at most 128 characters: a short value
    once seen is remembered, a long one (200 characters) is parsed each time and never kept, and 300 distinct
    short ones leave 256."""
    strict_json._charset.cache_clear()

    def sent(content_type: str) -> int:
        headers = {"Content-Type": content_type, **user("uma")}
        return client.post(TURNS.format("s1"), content=b"{}", headers=headers).status_code

    assert sent("application/json; charset=utf-8") == 422  # parsed, then refused by the model: no turns
    assert strict_json._charset.cache_info().currsize == 1
    long = "application/json; charset=utf-8; note=" + "x" * 162
    assert len(long) == 200 and sent(long) == 422
    assert strict_json._charset.cache_info().currsize == 1
    assert {sent(f"application/json; charset=utf-8; n={i}") for i in range(300)} == {422}
    assert strict_json._charset.cache_info().currsize == 256


# --- the dream-pending mark (d6d0b76) ----------------------------------------------------------------


def _pending(raw: redis.Redis, prefix: str, user_id: str) -> bytes | None:
    return raw.get(f"{prefix}:u:{{{user_id}}}:dream:pending")  # type: ignore[return-value]


@pytest.fixture
def gave_up(
    deferred: tuple[TestClient, MemoryCoordinator, StubModelServer],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[TestClient, MemoryCoordinator, StubModelServer]:
    """``test_dream_pending``'s app (LLM consolidation on the local stub, which the guard's ``auto`` policy
    defers after a session end until it gives up) with user vic's run given up; the maintenance sweep's own
    slot then a cloud model (never deferred by the guard), the consolidation slot still the local stub."""
    client, coordinator, stub = deferred
    _given_up(client, coordinator, "vic")
    services = coordinator.services
    slots = {**services.settings.llm_slots, "maintenance": CLOUD}
    monkeypatch.setattr(services, "settings", services.settings.with_overrides(llm_slots=slots))
    return client, coordinator, stub


def test_a_sweep_the_guard_lets_run_leaves_a_deferred_llm_dreamer_pending(
    gave_up: tuple[TestClient, MemoryCoordinator, StubModelServer], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The sweep runs (its cloud slot is never deferred) while the guard still defers the local consolidation
    model (a session ended a moment ago): the pending run is not made, no LLM request, the mark stays, and the
    report says deferred. (Planted: the guard asked for the rules Dreamer instead, or for the sweep's slot.)"""
    client, _, stub = gave_up
    mark = _pending(raw_redis, key_prefix, "vic")
    assert mark is not None

    run = run_maintenance(client, "vic")

    assert run["status"] == "completed", run
    assert run["report"]["summary"]["pendingDream"]["status"] == "deferred", run["report"]["summary"]
    assert stub.requests_to("/api/chat") == []
    assert _pending(raw_redis, key_prefix, "vic") == mark


def test_a_retried_run_that_fails_again_is_left_for_the_next_sweep(
    gave_up: tuple[TestClient, MemoryCoordinator, StubModelServer],
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard now allows the run, but it raises (an unexpected error): the sweep still completes and says
    failed with the error, and the mark stays; the next sweep runs it and clears the mark. (Planted: only some
    errors caught: the sweep fails; the mark dropped on the failure: never retried.)"""
    client, coordinator, stub = gave_up
    guard = coordinator.services.guard
    monkeypatch.setattr(guard, "config", replace(guard.config, policy=Policy.always))

    def crash(*_: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(dream_retry, "run_dreamer", crash)
    failed = run_maintenance(client, "vic")
    monkeypatch.setattr(dream_retry, "run_dreamer", run_dreamer)

    assert failed["status"] == "completed", failed
    assert failed["report"]["summary"]["pendingDream"] == {"status": "failed", "error": "RuntimeError: disk full"}
    assert _pending(raw_redis, key_prefix, "vic") is not None
    stub.queue_chat(json.dumps({"conclusions": []}))
    ran = run_maintenance(client, "vic")
    assert ran["report"]["summary"]["pendingDream"]["status"] == "ran", ran["report"]["summary"]
    assert _pending(raw_redis, key_prefix, "vic") is None


def test_an_opt_out_made_by_another_process_a_moment_ago_drops_the_mark(
    settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The nightly sweep's process read the user's opt-out a moment ago (not opted out); another process opts
    them out, keeping their data. The sweep (``coordinator.maintain``: the CLI's and the nightly flow's call)
    reads it afresh: the pending run is dropped, not made, and the mark is gone. (Planted: the cached opt-out
    read; the mark not cleared when dropped.)"""
    rules = settings.with_overrides(background_work_policy="always", maintenance=NO_WAITS)
    nightly, api = MemoryCoordinator(rules), MemoryCoordinator(rules)
    try:
        with TestClient(create_app(coordinator=api)) as client:
            assert end_session(client, "wes", "s1", [{"role": "user", "content": "I live in Porto."}])["saved"]
            assert api.dreamer.wait(30)
            nightly.services.dream_markers.mark_pending("wes")  # a later run of theirs gave up
            assert nightly.services.privacy.is_opted_out("wes") is False  # read, and remembered for a moment
            opted = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("wes"))
            assert opted.status_code == 200, opted.text

            first = nightly.maintain("wes")

            assert first.summary["pendingDream"] == {"status": "dropped", "reason": "opted out"}, first.summary
            assert _pending(raw_redis, key_prefix, "wes") is None  # not dropped again by every later sweep
    finally:
        nightly.close()
        api.close()


def test_a_run_clears_only_its_own_mark_not_a_later_session_ends(settings: Settings, raw_redis: redis.Redis) -> None:
    """Two session ends mark the user in turn (each its own token); the first run succeeding clears its mark
    only: the second end's mark stays for its run (compare-and-delete), and that one clears it."""
    coordinator = MemoryCoordinator(settings)
    try:
        markers = coordinator.services.dream_markers
        first = markers.mark_pending("xan")
        second = markers.mark_pending("xan")
        assert first != second
        markers.clear_pending("xan", first)
        assert markers.pending("xan") == second
        markers.clear_pending("xan", second)
        assert markers.pending("xan") is None
    finally:
        coordinator.close()


# --- the read catch-up (f50714e, e5) -----------------------------------------------------------------


def test_a_quiet_users_ask_stores_their_queued_end(
    serve: Serve,  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """README: a read — search, context *and ask* — of a quiet user stores their queued ends first: after
    ``POST /api/memory/ask`` the end's job is gone from the queue and from the user's queued ends.
    (Planted: ``ask`` without the catch-up.)"""
    client, _ = serve()
    end(client, "vera", "trip")
    time.sleep(QUIET_S + 0.3)
    asked = client.post("/api/memory/ask", json={"question": QUERY}, headers=user("vera"))
    assert asked.status_code == 200, asked.text
    assert queued_users(raw_redis, key_prefix) == []
    assert user_keys(raw_redis, key_prefix, "vera", "ends:queued") == []


def test_a_user_whose_newest_end_is_fresh_is_left_to_the_worker(
    serve: Serve,  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """``AGTOS_READ_CATCHUP_AFTER_S=2``: an end 2.3 s old, then another just made: the user's *newest* queued
    end is fresh, so a search stores nothing (both stay queued). (Planted: the oldest end's time read.)"""
    client, _ = serve(after=2.0)
    end(client, "wren", "first")
    time.sleep(2.3)
    end(client, "wren", "second")
    search(client, "wren")
    assert queued_users(raw_redis, key_prefix) == ["wren", "wren"]


def test_an_expired_session_journal_is_not_a_live_session(
    serve: Serve,  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """The user's set of live journals (``<prefix>:u:{<user>}:journals:live``, score: expiry ms) still names a
    session whose journal expired a minute ago: not live, so the quiet user's search stores their queued end.
    (Planted: every member counted, expired or not.)"""
    client, _ = serve()
    end(client, "yves", "trip")
    live = f"{key_prefix}:u:{{yves}}:journals:live"
    raw_redis.zadd(live, {"left-open": int(time.time() * 1000) - 60_000})
    time.sleep(QUIET_S + 0.3)
    assert [hit["sessionId"] for hit in search(client, "yves")] == ["trip"]
    assert queued_users(raw_redis, key_prefix) == []


def test_a_catch_up_behind_a_held_writer_lock_gives_up_within_its_second(
    serve: Serve,  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Another process holds the user's writer locks (memories, entities) for 5 s: the quiet user's catch-up
    waits for the first of them 1 s at most and gives up, so the search answers and the job stays queued for
    the worker, also once the holder's keys are gone (2 s after). (Planted: the bound a minute: the catch-up
    waits the holder out and stores it.)"""
    client, _ = serve()
    end(client, "zora", "trip")
    for name in ("memories", "entities"):
        assert raw_redis.set(f"{key_prefix}:u:{{zora}}:writers:{name}", "another-process", nx=True, px=5_000)
    held_until = time.monotonic() + 5.0
    time.sleep(QUIET_S + 0.3)
    started = time.monotonic()
    search(client, "zora")  # what it stored before its first lock (the episode) may be found already
    assert time.monotonic() - started < 8.0
    time.sleep(max(0.0, held_until - time.monotonic()) + 2.0)
    assert queued_users(raw_redis, key_prefix) == ["zora"]
