"""README promises on limits and the ingestion queue, set by their environment variables.

The configuration table documents ``AGTOS_SESSION_MAX_TURNS`` / ``_MAX_BYTES``,
``AGTOS_USER_MAX_SESSIONS`` / ``AGTOS_USER_MAX_TURNS`` ("413 past them"), ``AGTOS_WM_MAX_SESSIONS``
("least recently used go back to their journal"), ``AGTOS_INGEST_CLAIM_IDLE_S`` and
``AGTOS_INGEST_RETRY_DELAY_S``. Other tests set these through ``Settings`` objects, which a
misspelt variable name would not break; here each is set in the environment and the app is built
as ``agtos serve`` builds it, then watched through HTTP (and the queue's worker, driven by hand).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import SessionJob
from tests import test_env_settings
from tests.helpers import user, user_key_names
from tests.redis_process import RedisProcess
from tests.stub_servers import StubModelServer
from tests.test_env_settings import Serve
from tests.test_ingest_queue import KEYBOARD

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

WHO = "capped"
QUEUE = {"AGTOS_INGEST_MODE": "queue", "AGTOS_INGEST_WORKER": "false", "AGTOS_END_IDLE_WAIT_S": "0"}


def append(client: TestClient, session: str, *contents: str, who: str = WHO) -> Any:
    turns = [{"role": "user", "content": c} for c in contents]
    return client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))


def shown(client: TestClient, session: str, who: str = WHO) -> list[str]:
    """The session's messages as GET answers them (from the journal on any process)."""
    response = client.get(f"/api/memory/sessions/{session}", headers=user(who))
    assert response.status_code == 200, response.text
    return [m["content"] for m in response.json()["messages"]]


def journal(raw: redis.Redis, prefix: str, session: str, who: str = WHO) -> int:
    return int(raw.llen(f"{prefix}:u:{{{who}}}:session:{session}:turns"))


def coordinator_of(client: TestClient) -> MemoryCoordinator:
    return client.app.state.coordinator  # type: ignore[attr-defined]


# -- journal caps: 413, nothing written ------------------------------------------------------
def test_session_caps_come_from_their_variables(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    with serve(AGTOS_SESSION_MAX_TURNS="3") as client:
        assert append(client, "t", "one", "two").status_code == 200
        refused = append(client, "t", "three", "four")  # 4 turns > 3
        assert refused.status_code == 413 and "(AGTOS_SESSION_MAX_TURNS)" in refused.json()["message"]
        assert shown(client, "t") == ["one", "two"] and journal(raw_redis, key_prefix, "t") == 2  # all or none
        assert append(client, "t", "three").status_code == 200  # the cap itself fits
    with serve(AGTOS_SESSION_MAX_BYTES="400") as client:  # a journalled turn is ~100 bytes of JSON
        assert append(client, "b", "short").status_code == 200
        too_big = append(client, "b", "x" * 400)
        assert too_big.status_code == 413 and "(AGTOS_SESSION_MAX_BYTES)" in too_big.json()["message"]
        assert shown(client, "b") == ["short"] and journal(raw_redis, key_prefix, "b") == 1


def test_user_caps_come_from_their_variables(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    with serve(AGTOS_USER_MAX_SESSIONS="2", AGTOS_USER_MAX_TURNS="4") as client:
        assert append(client, "a", "one", "two").status_code == 200
        assert append(client, "b", "three").status_code == 200
        third = append(client, "c", "four")  # a third live session
        assert third.status_code == 413 and "(AGTOS_USER_MAX_SESSIONS)" in third.json()["message"]
        assert journal(raw_redis, key_prefix, "c") == 0
        assert append(client, "c", "four", who="other").status_code == 200  # another user's caps are their own
        five = append(client, "b", "four", "five")  # 3 + 2 > 4 turns in the user's live sessions
        assert five.status_code == 413 and "(AGTOS_USER_MAX_TURNS)" in five.json()["message"]
        assert shown(client, "b") == ["three"]
        assert append(client, "b", "four").status_code == 200


def test_wm_max_sessions_sends_the_least_recent_back_to_its_journal(serve: Serve) -> None:
    with serve(AGTOS_WM_MAX_SESSIONS="2") as client:
        for session in ("s1", "s2", "s3"):
            assert append(client, session, f"first of {session}", f"second of {session}").status_code == 200
        held = coordinator_of(client).working.active_sessions()
        assert sorted(held) == [(WHO, "s2"), (WHO, "s3")]  # s1, least recently used, left the process
        assert shown(client, "s1") == ["first of s1", "second of s1"]  # served from its journal
        ack = append(client, "s1", "third of s1").json()
        assert (ack["messageCount"], ack["journalLength"]) == (3, 3)


# -- the ingestion queue's timing variables ----------------------------------------------------
def end_queued(client: TestClient, who: str) -> str:
    appended = client.post("/api/memory/sessions/chat/turns", json={"turns": KEYBOARD}, headers=user(who))
    assert appended.status_code == 200, appended.text
    ended = client.post("/api/memory/sessions/chat/end", headers=user(who))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text
    return str(ended.json()["episodeId"])


def episode_ids(client: TestClient, who: str) -> list[str]:
    listed = client.get("/api/memory/episodes", headers=user(who))
    assert listed.status_code == 200, listed.text
    return [e["id"] for e in listed.json()["episodes"]]


def test_ingest_claim_idle_s_hands_a_dead_workers_job_on(serve: Serve) -> None:
    """A job taken by a worker that died is taken over once pending this long (default 120 s)."""
    with serve(**QUEUE, AGTOS_INGEST_CLAIM_IDLE_S="0.5") as client:
        coordinator = coordinator_of(client)
        episode = end_queued(client, "gus")
        [taken] = coordinator.ingest_queue.read("dead-worker", 1, 0)  # taken, never acknowledged
        worker = coordinator.ingest_worker()
        assert worker.run_once(block=False) == 0  # still fresh: its worker may be on it
        time.sleep(0.7)
        assert worker.run_once(block=False) == 1
        assert taken.deliveries == 1 and episode_ids(client, "gus") == [episode]


class FailOnce:
    """A worker's job handler whose first call fails, as when its embedder is still loading."""

    def __init__(self, handle: Callable[[SessionJob], object]) -> None:
        self.handle, self.sessions = handle, list[str]()

    def __call__(self, job: SessionJob) -> object:
        self.sessions.append(job.session_id)
        if len(self.sessions) == 1:
            raise RuntimeError("embedder not loaded yet")
        return self.handle(job)


def test_ingest_retry_delay_s_holds_a_failed_job_back(serve: Serve) -> None:
    """A failed job is handed back, claimable only after the retry delay (default 5 s), then stored."""
    with serve(**QUEUE, AGTOS_INGEST_RETRY_DELAY_S="1") as client:
        coordinator = coordinator_of(client)
        episode = end_queued(client, "zed")
        worker = coordinator.ingest_worker()
        worker.handle = failing = FailOnce(worker.handle)
        outcomes = [worker.run_once(block=False), worker.run_once(block=False)]
        assert outcomes == [1, 0]  # failed and handed back; not claimable before the delay
        time.sleep(1.3)
        assert worker.run_once(block=False) == 1
        assert failing.sessions == ["chat", "chat"] and episode_ids(client, "zed") == [episode]


def test_an_opted_out_users_evicted_session_is_gone(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    """README: "(an opted-out user's session, having no journal, is then gone)"; its turns were never in Redis."""
    with serve(AGTOS_WM_MAX_SESSIONS="1") as client:
        opted = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga"))
        assert opted.status_code == 200, opted.text
        assert append(client, "s1", "my locker code is 4417", who="olga").status_code == 200
        assert shown(client, "s1", who="olga") == ["my locker code is 4417"]  # working memory only
        assert append(client, "s2", "another session", who="olga").status_code == 200  # s1 leaves the process
        assert client.get("/api/memory/sessions/s1", headers=user("olga")).status_code == 404
        assert shown(client, "s2", who="olga") == ["another session"]
    kept = user_key_names(raw_redis, key_prefix, "olga")
    assert not [name for name in kept if ":session:" in name or ":turns" in name], kept  # no journal, ever


# -- a remote embedder's bound while a request is served ---------------------------------------
BEES = {"text": "Wren keeps bees on the roof", "kind": "fact"}


def test_embedding_request_timeout_s_bounds_a_memory_writes_wait(serve: Serve) -> None:
    """README: ``AGTOS_EMBEDDING_REQUEST_TIMEOUT_S`` (5 s) is "the longest wait before the request goes on
    without vectors"; a memory written meanwhile "is stored for keyword search and noted for its vector"
    (``/health``'s ``tiers.semantic.pendingVectors``). An embedder answering in 1 s: within the default
    bound the vector is written; with the variable at 0.3 s it is not."""
    with StubModelServer() as stub:
        remote = {
            "AGTOS_EMBEDDING_PROVIDER": "openai",
            "AGTOS_EMBEDDING_BASE_URL": f"{stub.url}/v1",
            "AGTOS_EMBEDDING_MODEL": "stub-embed",
            "AGTOS_EMBEDDING_BREAKER_FAILURES": "0",
        }
        stub.delay_s = 1.0
        for bound, pending in ((None, 0), ("0.3", 1)):
            variables = remote | ({"AGTOS_EMBEDDING_REQUEST_TIMEOUT_S": bound} if bound else {})
            with serve(**variables) as client:
                who = f"writer-{pending}"
                written = client.post("/api/memory/memories", json=BEES, headers=user(who))
                assert written.status_code == 201, written.text
                health = client.get("/health").json()
                assert health["tiers"]["semantic"]["pendingVectors"] == pending, health["tiers"]["semantic"]


# -- the Redis socket timeout ----------------------------------------------------------------
@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    """A Redis of this test's own: it is paused (CLIENT PAUSE), which the shared one must never be."""
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.mark.parametrize(("timeout", "status"), [("0.3", 503), ("10", 200)])
def test_redis_timeout_s_is_the_socket_timeout(
    serve: Serve, private_redis: RedisProcess, timeout: str, status: int
) -> None:
    """README: ``AGTOS_REDIS_TIMEOUT_S`` (1 s) is the "socket timeout of Redis calls". Redis paused for
    2.5 s: a turn append gives up (503, nothing journalled) with 0.3 s, and waits it out with 10 s."""
    with serve(REDIS_URL=private_redis.url, AGTOS_REDIS_TIMEOUT_S=timeout) as client:
        assert append(client, "s", "before the pause").status_code == 200
        redis.Redis.from_url(private_redis.url).execute_command("CLIENT", "PAUSE", "2500", "ALL")
        during = append(client, "s", "during the pause")
        assert during.status_code == status, during.text
        time.sleep(2.6)  # the pause is over
        expected = ["before the pause", "during the pause"][: 2 if status == 200 else 1]
        assert shown(client, "s") == expected
