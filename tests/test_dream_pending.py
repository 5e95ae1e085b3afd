"""A Dreamer run that gave up or failed is retried by the maintenance sweep (issue 15, e1).

A session end claims its episode's run-once marker and starts the Dreamer. Before the fix a run the
ResourceGuard put off until it gave up (LLM consolidation) only logged, and one that raised on the rules path
(a live holder kept the user's conclusions lock past ``AGTOS_LOCK_WAIT_MAX_S``) was swallowed by the event
bus: the marker stayed claimed, so that episode was never dreamed unless the same user ended another session.
Now the user is marked "dream pending" (``<prefix>:u:{<user>}:dream:pending``) before each run, the run that
succeeds clears it, and ``POST /api/memory/maintain`` (the lint sweep; nightly for every user) runs the
Dreamer first for a user still marked. Through the HTTP API on real Redis (the test's DB), the bundled models,
and the local model-server stub in the ``consolidation`` slot, as ``test_dreamer.py`` sets it up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
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


def _given_up(client: TestClient, coordinator: MemoryCoordinator, user_id: str) -> str:
    """End a session saying a preference; its Dreamer run is put off until it gives up. Returns the episode id."""
    turns = [
        {"role": "user", "content": "Morning! Weather forecast please."},
        {"role": "assistant", "content": "Cloudy, 11 degrees."},
        {"role": "user", "content": "I prefer metric units, always."},
    ]
    ended = end_session(client, user_id, "tue", turns)
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
