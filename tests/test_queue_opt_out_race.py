"""Issue 15: a user opts out (from another API process) while the queue worker's run, or a back-fill, writes
their sessions.

The worker checks the opt-out before its run; an opt-out landing while the run writes used to keep the
episodes (the same gap an import had, 48dbe2e). README: an opted-out user keeps working memory only.
Through the HTTP routes in queue mode, the worker driven step by step, the other process a second coordinator."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest
from fastapi.testclient import TestClient

import agtos.memory.coordinator
import agtos.memory.ingest_worker
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_conversation_ingest import SESSIONS, ingest
from tests.test_ingest_batch import TRIP
from tests.test_ingest_queue import KEYBOARD, end, queue_client, queue_coordinator, queue_settings

__all__ = ["queue_client", "queue_coordinator", "queue_settings"]  # the fixtures, shared


@contextmanager
def opting_out_after_the_run(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, settings: Settings, who: str, written: int
) -> Iterator[None]:
    """``module.run_ingestion`` writes (``written`` episodes), then ``who`` opts out through another
    process (a second coordinator, its own opt-out cache) before the caller's check runs."""
    original, other = module.run_ingestion, MemoryCoordinator(settings)

    def ingest_then_opt_out(*args: Any, **kwargs: Any) -> Any:
        report = original(*args, **kwargs)
        assert len(report.episode_ids) == written  # written before the opt-out lands
        other.privacy.set_opt_out(who, True)
        return report

    monkeypatch.setattr(module, "run_ingestion", ingest_then_opt_out)
    try:
        yield
    finally:
        other.close()


def test_an_opt_out_while_the_worker_writes_keeps_none_of_the_users_run(
    queue_client: TestClient,
    queue_coordinator: MemoryCoordinator,
    queue_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """una opts out after the run wrote her two sessions and omar's: hers are forgotten again, his stay."""
    kept_before = end(queue_client, "una", "s0", TRIP)
    assert queue_coordinator.ingest_worker().run_once(block=False) == 1  # stored before: it stays
    for who in ("una", "omar"):
        end(queue_client, who, "s1", KEYBOARD)
        end(queue_client, who, "s2", TRIP)
    with opting_out_after_the_run(monkeypatch, agtos.memory.ingest_worker, queue_settings, "una", 4):
        assert queue_coordinator.ingest_worker().run_once(block=False) == 4
    listed = queue_client.get("/api/memory/episodes", headers=user("una")).json()["episodes"]
    assert [e["id"] for e in listed] == [kept_before["episodeId"]]
    found = queue_client.get("/api/memory/search", params={"q": "mechanical keyboard"}, headers=user("una"))
    assert all(h["id"] == kept_before["episodeId"] for h in found.json()["results"]), found.json()
    memories = queue_client.get("/api/memory/memories", params={"limit": 100}, headers=user("una")).json()
    assert not [m["text"] for m in memories["memories"] if "QZ-4417" in m["text"] or "tactile" in m["text"]]
    assert len(queue_client.get("/api/memory/episodes", headers=user("omar")).json()["episodes"]) == 2
    omar = queue_client.get("/api/memory/memories", params={"limit": 100}, headers=user("omar")).json()
    assert [m["text"] for m in omar["memories"] if "QZ-4417" in m["text"]], omar  # learnt from his own s1


def test_an_opt_out_while_a_back_fill_writes_keeps_none_of_it(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /conversations: the user opts out through another process after the run wrote her three
    sessions: each is answered skipped 'user opted out of persistence', none is listed or searchable."""
    with opting_out_after_the_run(monkeypatch, agtos.memory.coordinator, settings, "vera", 3):
        body = ingest(client, "vera", SESSIONS)
    assert [(s["id"], s["status"], s["reason"]) for s in body["sessions"]] == [
        (s["id"], "skipped", "user opted out of persistence") for s in SESSIONS
    ]
    assert (body["stored"], body["skipped"]) == (0, 3)
    assert client.get("/api/memory/episodes", headers=user("vera")).json()["count"] == 0
    assert client.get("/api/memory/memories", headers=user("vera")).json()["total"] == 0
    found = client.get("/api/memory/search", params={"q": "window seats Lisbon"}, headers=user("vera")).json()
    assert found["results"] == []
