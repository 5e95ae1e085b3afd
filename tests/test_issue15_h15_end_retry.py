"""A retried session end learns where the session's turns went (issue 15 leftovers).

The client ends session S, the answer is lost, it ends S again: the journal was cleared by the first
end, so the retry answers ``session has no turns`` (kept: the skipped shape of an end without turns)
and used to say nothing of the episode the first end made. It now carries ``lastEnd``: the session's
last end that took turns, with its episode as it is now (done, queued, skipped, gone). An end that
never followed one has no ``lastEnd`` at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import SKIPPED, user

METRIC = [
    {"role": "user", "content": "I prefer answers in metric units, please remember that"},
    {"role": "assistant", "content": "Noted."},
]
IMPERIAL = [
    {"role": "user", "content": "Actually I prefer imperial units for cooking, please remember"},
    {"role": "assistant", "content": "Noted."},
]
SMALL_TALK = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello!"}]
NO_TURNS = {"saved": False, "reason": "session has no turns", "episode": None, **SKIPPED}


def post(client: TestClient, who: str, session: str, turns: list[dict[str, str]]) -> None:
    appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert appended.status_code == 200, appended.text


def end(client: TestClient, who: str, session: str, **params: Any) -> dict[str, Any]:
    ended = client.post(f"/api/memory/sessions/{session}/end", params=params, headers=user(who))
    assert ended.status_code == 200, ended.text
    body: dict[str, Any] = ended.json()
    return body


def without_time(body: dict[str, Any], since_ms: int) -> dict[str, Any]:
    """``body`` less ``lastEnd.endedAt``, checked to be a time of this test (ms since the epoch)."""
    last = dict(body["lastEnd"])
    assert since_ms <= last.pop("endedAt") <= int(time.time() * 1000)
    return {**body, "lastEnd": last}


def test_a_retried_end_names_the_episode_the_first_end_stored(client: TestClient) -> None:
    since = int(time.time() * 1000)
    post(client, "rita", "s1", METRIC)
    first = end(client, "rita", "s1")
    assert (first["status"], first["saved"], first["reason"]) == ("done", True, "stated preference")
    assert "lastEnd" not in first  # an end that took turns says what it did itself
    again = end(client, "rita", "s1")
    assert without_time(again, since) == {
        "sessionId": "s1",
        **NO_TURNS,
        "lastEnd": {
            "episodeId": first["episodeId"],
            "status": "done",
            "saved": True,
            "reason": "stated preference",
            "turnsAccepted": 2,
        },
    }
    # continued after its end: a second segment, a second episode; a retry names the latest
    post(client, "rita", "s1", IMPERIAL)
    second = end(client, "rita", "s1")
    assert second["saved"] is True and second["episodeId"] != first["episodeId"]
    assert end(client, "rita", "s1")["lastEnd"]["episodeId"] == second["episodeId"]
    # that episode forgotten since: no trace of it is left, its id in the retry's answer included
    forget = {"kind": "episode", "id": second["episodeId"]}
    forgot = client.post("/api/memory/forget", json=forget, headers=user("rita"))
    assert forgot.status_code == 200, forgot.text
    assert end(client, "rita", "s1") == {"sessionId": "s1", **NO_TURNS}
    # forget-all takes the record with everything else
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("rita")).status_code == 200
    assert end(client, "rita", "s1") == {"sessionId": "s1", **NO_TURNS}


def test_an_end_that_kept_nothing_is_named_too_and_other_sessions_and_users_have_none(client: TestClient) -> None:
    assert end(client, "sam", "never") == {"sessionId": "never", **NO_TURNS}  # no end before: no lastEnd
    since = int(time.time() * 1000)
    post(client, "sam", "chat", SMALL_TALK)
    assert end(client, "sam", "chat")["reason"] == "greeting or small talk only"
    assert without_time(end(client, "sam", "chat"), since)["lastEnd"] == {
        "episodeId": None,
        "status": "skipped",
        "saved": False,
        "reason": "greeting or small talk only",
        "turnsAccepted": 2,
    }
    assert end(client, "sam", "other") == {"sessionId": "other", **NO_TURNS}
    assert end(client, "tia", "chat") == {"sessionId": "chat", **NO_TURNS}  # another user's session of that id


@pytest.fixture
def queue_coordinator(settings: Settings) -> Iterator[MemoryCoordinator]:
    """Queue mode without the API's worker thread: the test runs the worker."""
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    yield coordinator
    coordinator.close()


def test_a_retried_queued_end_follows_its_job(queue_coordinator: MemoryCoordinator) -> None:
    with TestClient(create_app(coordinator=queue_coordinator)) as client:
        post(client, "quin", "s1", METRIC)
        first = end(client, "quin", "s1", wait=0)
        assert (first["status"], first["episodeId"] is not None) == ("queued", True)
        queued = end(client, "quin", "s1", wait=0)["lastEnd"]
        assert (queued["episodeId"], queued["status"], queued["saved"]) == (first["episodeId"], "queued", True)
        assert queue_coordinator.sessions.ingest_worker().drain() == 1
        done = end(client, "quin", "s1", wait=0)
        assert {k: v for k, v in done.items() if k != "lastEnd"} == {"sessionId": "s1", **NO_TURNS}
        assert (done["lastEnd"]["episodeId"], done["lastEnd"]["status"]) == (first["episodeId"], "done")
        listed = client.get("/api/memory/episodes", headers=user("quin")).json()["episodes"]
        assert [e["id"] for e in listed] == [first["episodeId"]]


def test_the_openapi_document_declares_last_end(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert list(schemas["SessionEndOut"]["properties"])[-1] == "lastEnd"
    assert "lastEnd" not in schemas["SessionEndOut"].get("required", [])
    last = schemas["LastEndOut"]
    assert list(last["properties"]) == ["episodeId", "status", "saved", "reason", "turnsAccepted", "endedAt"]
    assert last["properties"]["status"]["enum"] == ["done", "queued", "skipped", "gone"]
