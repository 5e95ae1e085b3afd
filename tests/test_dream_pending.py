"""A Dreamer run that gave up or failed is retried by the maintenance sweep (issue 15, e1).

A session end claims its episode's run-once marker and starts the Dreamer. Before the fix a run the
ResourceGuard put off until it gave up (LLM consolidation) only logged, and one that raised on the rules path
(a live holder kept the user's conclusions lock past ``AGTOS_LOCK_WAIT_MAX_S``) was swallowed by the event
bus: the marker stayed claimed, so that episode was never dreamed unless the same user ended another session.
Now the user is marked "dream pending" (``<prefix>:u:{<user>}:dream:pending``) before each run, the run that
succeeds clears it, and ``POST /api/memory/maintain`` (the lint sweep; nightly for every user) runs the
Dreamer first for a user still marked. Through the HTTP API on real Redis (the test's DB), the bundled models,
and the local model-server stub in the ``consolidation`` slot, as ``test_dreamer.py`` sets it up.

Issue 15 (f1): the mark used to be set by the Dreamer's handler of the ``sessionEnded`` event, after the
episode's store: Redis restarting just then, or the process dying between the two, left that episode never
dreamed (logged only). Now the mark is written with the episode (one atomic step), and a successful manual
run (``POST /api/memory/dream``) clears the mark it covers (compare-and-delete: an end that marked during
the run keeps its mark); before, the next sweep ran the Dreamer once more.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import LLMSlot, MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.resource_guard import Policy
from agtos.serving.app import create_app
from agtos.storage.user_lock import limit_waits
from tests.helpers import end_session, run_maintenance, user
from tests.redis_process import RedisProcess
from tests.stub_servers import StubModelServer

NO_WAITS = MaintenanceConfig(guard_retries=0, guard_delay_s=0.0)  # a sweep the guard defers answers at once
LLM_CONCLUSION = "User checks the weather every morning"
MARK_TTL_S = 7 * 86_400  # the pending mark's lifetime, as the Dreamer's run-once markers'


def _conclusions(client: TestClient, user_id: str) -> list[dict[str, Any]]:
    return list(client.get("/api/memory/conclusions", headers=user(user_id)).json()["conclusions"])


def _pending_keys(raw: redis.Redis, prefix: str, user_id: str) -> list[bytes]:
    """The user's Dreamer pending keys, by a literal SCAN pattern of the README's layout."""
    return sorted(raw.scan_iter(match=f"{prefix}:u:{{{user_id}}}:dream:*", count=1_000))


@pytest.fixture
def deferred(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator, StubModelServer]]:
    """LLM consolidation on the stub (a local Ollama: it waits for the guard), the guard's ``auto`` policy
    deferring it (a session just ended) twice 10 ms apart, then giving up."""
    with StubModelServer() as stub:
        slot = LLMSlot(provider="ollama", model="qwen3:4b", base_url=stub.url)
        coordinator = MemoryCoordinator(
            settings.with_overrides(
                llm_slots={"consolidation": slot},
                background_work_policy="auto",
                dreamer_retries=2,
                dreamer_retry_delay_s=0.01,
                maintenance=NO_WAITS,
            )
        )
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                yield client, coordinator, stub
        finally:
            coordinator.close()


METRIC = [
    {"role": "user", "content": "Morning! Weather forecast please."},
    {"role": "assistant", "content": "Cloudy, 11 degrees."},
    {"role": "user", "content": "I prefer metric units, always."},
]
METRIC_CONCLUSION = "User prefers metric units, always"  # the rules' explicit conclusion of METRIC


def _given_up(client: TestClient, coordinator: MemoryCoordinator, user_id: str, session_id: str = "tue") -> str:
    """End a session saying a preference; its Dreamer run is put off until it gives up. Returns the episode id."""
    ended = end_session(client, user_id, session_id, METRIC)
    assert ended["saved"] is True, ended
    assert coordinator.dreamer.wait(30)
    return str(ended["episode"]["id"])


def test_an_llm_dreamer_run_the_guard_gave_up_is_run_by_the_next_maintenance_sweep(
    deferred: tuple[TestClient, MemoryCoordinator, StubModelServer],
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run gives up: no conclusion, no LLM request, the user marked pending. Later (the guard now allows
    background work) ``POST /maintain``'s sweep runs the Dreamer: the LLM's conclusion citing that session's
    episode and the rules' explicit one are listed, the report says so, and the mark is gone. Before the fix
    the sweep dreamed nothing: no conclusion, ever."""
    client, coordinator, stub = deferred
    episode = _given_up(client, coordinator, "ivy")
    assert _conclusions(client, "ivy") == []
    assert stub.requests_to("/api/chat") == []
    assert _pending_keys(raw_redis, key_prefix, "ivy") == [f"{key_prefix}:u:{{ivy}}:dream:pending".encode()]

    reply = {
        "conclusions": [
            {"text": LLM_CONCLUSION, "type": "inductive", "confidence": 0.8, "source_episode_ids": [episode]}
        ]
    }
    stub.queue_chat(json.dumps(reply))
    guard = coordinator.services.guard
    monkeypatch.setattr(guard, "config", replace(guard.config, policy=Policy.always))  # the machine is idle now
    run = run_maintenance(client, "ivy")

    assert run["status"] == "completed", run
    assert run["report"]["summary"]["pendingDream"] == {"status": "ran", "conclusions": 2, "source": "llm:ollama"}
    stored = {c["text"]: c for c in _conclusions(client, "ivy")}
    assert sorted(stored) == [LLM_CONCLUSION, "User prefers metric units, always"], sorted(stored)
    assert stored[LLM_CONCLUSION]["source_episode_ids"] == [episode]
    assert len(stub.requests_to("/api/chat")) == 1
    assert _pending_keys(raw_redis, key_prefix, "ivy") == []
    assert "pendingDream" not in run_maintenance(client, "ivy")["report"]["summary"]  # nothing left to retry


def test_forget_all_removes_the_pending_mark(
    deferred: tuple[TestClient, MemoryCoordinator, StubModelServer], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A user whose run gave up is marked for 7 days (the sweeps' retries end then); they forget everything:
    the mark goes with their other keys (the SCAN of their key family finds nothing)."""
    client, coordinator, _ = deferred
    _given_up(client, coordinator, "jo")
    assert _pending_keys(raw_redis, key_prefix, "jo") == [f"{key_prefix}:u:{{jo}}:dream:pending".encode()]
    ttl = raw_redis.ttl(f"{key_prefix}:u:{{jo}}:dream:pending")
    assert MARK_TTL_S - 60 <= ttl <= MARK_TTL_S, ttl  # retried by sweeps for a week at most

    forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("jo"))

    assert forgot.status_code == 200, forgot.text
    assert _pending_keys(raw_redis, key_prefix, "jo") == []
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:u:{{jo}}:*", count=1_000)) == []


def test_a_rules_dreamer_run_that_gave_up_a_held_lock_is_run_by_the_next_maintenance_sweep(
    settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A first session end is dreamed and its run clears the user's mark. Then rules consolidation (no LLM)
    behind another process's live conclusions lock (20 s) with ``AGTOS_LOCK_WAIT_MAX_S`` = 1: the session end
    answers 200 (its episode stored), the Dreamer gives up the lock after 1 s and stores nothing. Once the holder
    is done, the sweep stores the conclusion. Before the fix the ``LockWaitTooLong`` was swallowed by the event
    bus, its episode's marker kept: never dreamed."""
    coordinator = MemoryCoordinator(
        settings.with_overrides(background_work_policy="always", lock_wait_max_s=1.0, maintenance=NO_WAITS)
    )
    lock = f"{key_prefix}:u:{{kit}}:dreaming:conclusions"
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            first = end_session(client, "kit", "s0", [{"role": "user", "content": "I work at Globex in Lisbon."}])
            assert first["saved"] is True and coordinator.dreamer.wait(30), first
            assert _pending_keys(raw_redis, key_prefix, "kit") == []  # a run that succeeded cleared its mark
            assert raw_redis.set(lock, "another-process-token", nx=True, px=20_000)
            turns = [{"role": "user", "content": "I am allergic to peanuts."}]
            ended = end_session(client, "kit", "s1", turns)
            assert ended["saved"] is True, ended
            assert coordinator.dreamer.wait(30)
            before = sorted(c["text"] for c in _conclusions(client, "kit"))
            assert before and not any("peanuts" in text for text in before), before  # s0's only
            assert raw_redis.get(lock) == b"another-process-token"  # never written beside
            assert _pending_keys(raw_redis, key_prefix, "kit") == [f"{key_prefix}:u:{{kit}}:dream:pending".encode()]
            raw_redis.delete(lock)  # the holder is done

            run = run_maintenance(client, "kit")

            assert run["status"] == "completed", run
            assert run["report"]["summary"]["pendingDream"]["status"] == "ran", run["report"]["summary"]
            stored = {c["text"]: c for c in _conclusions(client, "kit")}
            peanuts = [  # the explicit statement and its deduction (README: allergy -> must avoid)
                "User is allergic to peanuts",
                "User must avoid peanuts, so food suggestions should leave it out",
            ]
            assert sorted(stored) == sorted([*before, *peanuts]), sorted(stored)
            assert stored["User is allergic to peanuts"]["source_episode_ids"] == [ended["episode"]["id"]]
            assert _pending_keys(raw_redis, key_prefix, "kit") == []
    finally:
        raw_redis.delete(lock)
        coordinator.close()
        limit_waits(settings.lock_wait_max_s)  # the process-wide limit back to the default's


def _raise(exc: Exception) -> None:
    raise exc


def _mark(raw: redis.Redis, prefix: str, user_id: str) -> bytes | None:
    return raw.get(f"{prefix}:u:{{{user_id}}}:dream:pending")  # type: ignore[return-value]


def test_a_redis_restart_as_the_session_ended_event_goes_out_leaves_the_run_to_the_next_sweep(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rules consolidation, a private append-only Redis restarted right when the ``sessionEnded`` event goes
    out (the episode is stored; the Dreamer's handler finds Redis away and skips its run, as it logs). The end
    still answers 200 saved. The next ``POST /maintain`` sweep runs the Dreamer: the conclusion cites the
    episode. Before the fix the mark was the handler's to write: none, the sweep dreamed nothing, ever."""
    server = RedisProcess(tmp_path / "redis", appendonly=True, extra_args=("--appendfsync", "always")).start()
    overrides = {"redis_url": server.url, "redis_timeout_s": 0.3, "maintenance": NO_WAITS}
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always", **overrides))
    emit = coordinator.events.emit

    def restarting(event: str, payload: dict[str, Any]) -> int:
        server.stop()
        try:
            return emit(event, payload)
        finally:
            server.start()

    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            monkeypatch.setattr(coordinator.events, "emit", restarting)
            ended = end_session(client, "una", "s1", METRIC)
            monkeypatch.setattr(coordinator.events, "emit", emit)
            assert ended["saved"] is True, ended
            assert _conclusions(client, "una") == []  # the run never started

            run = run_maintenance(client, "una")

            assert run["report"]["summary"]["pendingDream"]["status"] == "ran", run["report"]["summary"]
            stored = {c["text"]: c for c in _conclusions(client, "una")}
            assert stored[METRIC_CONCLUSION]["source_episode_ids"] == [ended["episode"]["id"]], stored
            assert _mark(redis.Redis.from_url(server.url), settings.key_prefix, "una") is None
    finally:
        coordinator.close()
        server.stop()


def test_a_worker_killed_right_after_the_episode_store_leaves_the_user_marked(
    settings: Settings, raw_redis: redis.Redis
) -> None:
    """Queue mode: the worker's first attempt dies right after the ingestion run stored the episode, before
    the ``sessionEnded`` event (the step after the store raises, as a kill there would stop it). The episode
    is stored and the user is already marked, for 7 days. The retried job dreams it and clears the mark.
    Before the fix the mark came with the event: none there."""
    killed_after_the_store(settings, raw_redis)


def killed_after_the_store(settings: Settings, raw: redis.Redis | redis.RedisCluster) -> None:
    """The worker-killed scenario above on the Redis of ``settings`` (``raw``: a client of it)."""
    queue = settings.with_overrides(ingest_mode="queue", ingest_worker=False, ingest_retry_delay_s=0.0)
    coordinator = MemoryCoordinator(queue.with_overrides(background_work_policy="always"))
    gate = coordinator.services.query_ingest  # its stamp is the first write after the ingestion run
    kills = [RuntimeError("worker killed right after the episode store")]
    stamp = gate.mark_interaction_saved
    gate.mark_interaction_saved = lambda *ids: stamp(*ids) if not kills else _raise(kills.pop())  # type: ignore
    mark = f"{settings.key_prefix}:u:{{vic}}:dream:pending"
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            ended = end_session(client, "vic", "s1", METRIC)
            assert ended["status"] == "queued", ended
            worker = coordinator.ingest_worker()
            assert worker.run_once(block=False) == 1  # stored, then killed
            assert raw.exists(f"{settings.key_prefix}:u:{{vic}}:episode:{ended['episodeId']}") == 1
            assert raw.get(mark) is not None
            assert MARK_TTL_S - 60 <= int(raw.ttl(mark)) <= MARK_TTL_S

            assert worker.run_once(block=False) == 1  # the retry: stored again, dreamed
            assert coordinator.dreamer.wait(30) and not kills
            stored = {c["text"]: c for c in _conclusions(client, "vic")}
            assert stored[METRIC_CONCLUSION]["source_episode_ids"] == [ended["episodeId"]], stored
            assert raw.get(mark) is None
    finally:
        coordinator.close()


def test_a_manual_dream_that_succeeds_clears_the_mark(
    deferred: tuple[TestClient, MemoryCoordinator, StubModelServer], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A run the guard gave up leaves the user marked; ``POST /api/memory/dream`` then consolidates (one LLM
    call) and clears the mark: the next sweep has no Dreamer run to retry and asks the LLM nothing. Before
    the fix the mark stayed and the sweep ran the Dreamer (and the LLM) once more."""
    client, coordinator, stub = deferred
    episode = _given_up(client, coordinator, "lea")
    assert _mark(raw_redis, key_prefix, "lea") is not None
    reply = {
        "conclusions": [
            {"text": LLM_CONCLUSION, "type": "inductive", "confidence": 0.8, "source_episode_ids": [episode]}
        ]
    }
    stub.queue_chat(json.dumps(reply))

    dreamt = client.post("/api/memory/dream", headers=user("lea"))

    assert dreamt.status_code == 200, dreamt.text
    assert LLM_CONCLUSION in [c["text"] for c in dreamt.json()["conclusions"]]
    assert _mark(raw_redis, key_prefix, "lea") is None
    assert "pendingDream" not in run_maintenance(client, "lea")["report"]["summary"]
    assert len(stub.requests_to("/api/chat")) == 1


def test_an_end_marked_during_a_manual_dream_keeps_its_mark(
    deferred: tuple[TestClient, MemoryCoordinator, StubModelServer],
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``POST /api/memory/dream`` is waiting for the LLM when another session of the user ends (its own run
    gives up): that end's mark is newer than what the manual run read, so the run's success leaves it, and the
    next sweep runs the Dreamer for it. A manual run clearing whatever mark it finds at its end would lose it."""
    client, coordinator, stub = deferred
    _given_up(client, coordinator, "max")
    first = _mark(raw_redis, key_prefix, "max")
    asked, answer = threading.Event(), threading.Event()

    def slow_reply(body: dict[str, Any]) -> str:
        asked.set()
        assert answer.wait(30)
        return json.dumps({"conclusions": []})

    stub.queue_chat(slow_reply)
    replies: list[int] = []

    def dream() -> None:
        replies.append(client.post("/api/memory/dream", headers=user("max")).status_code)

    manual = threading.Thread(target=dream)
    manual.start()
    try:
        assert asked.wait(30)
        later = _given_up(client, coordinator, "max", "wed")
        marked = _mark(raw_redis, key_prefix, "max")
    finally:
        answer.set()
        manual.join(30)
    assert replies == [200]
    assert first is not None and marked is not None and marked != first  # the end's own mark
    assert _mark(raw_redis, key_prefix, "max") == marked
    reply = {
        "conclusions": [{"text": LLM_CONCLUSION, "type": "inductive", "confidence": 0.8, "source_episode_ids": [later]}]
    }
    stub.queue_chat(json.dumps(reply))
    guard = coordinator.services.guard
    monkeypatch.setattr(guard, "config", replace(guard.config, policy=Policy.always))
    assert run_maintenance(client, "max")["report"]["summary"]["pendingDream"]["status"] == "ran"
    assert _mark(raw_redis, key_prefix, "max") is None
