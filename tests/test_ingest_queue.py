"""Session-end ingestion through the durable queue (Redis Streams) and its worker.

In queue mode ``POST …/end`` only takes the turns into a queue job and answers ``queued``; a
worker (a thread of the API, or ``agtos worker``) stores the episode. These tests go through the
HTTP routes and the CLI against the real Redis and models; the worker is driven step by step
where a test needs to see a crash, a retry or a dead consumer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user

KEYBOARD = [
    {"role": "user", "content": "I bought a QZ-4417 mechanical keyboard for coding at home."},
    {"role": "assistant", "content": "Nice, how do you like the QZ-4417 so far?"},
    {"role": "user", "content": "I prefer its tactile switches to the old membrane one, remember that."},
    {"role": "assistant", "content": "Noted: tactile switches over membrane keyboards."},
]


@pytest.fixture
def queue_settings(settings: Settings) -> Settings:
    """Queue mode, no worker thread in the app (the tests drive the worker); failed jobs retry at once."""
    return settings.with_overrides(
        ingest_mode="queue", ingest_worker=False, ingest_retry_delay_s=0.0, ingest_max_attempts=3
    )


@pytest.fixture
def queue_coordinator(queue_settings: Settings) -> Iterator[MemoryCoordinator]:
    coord = MemoryCoordinator(queue_settings)
    yield coord
    coord.close()


@pytest.fixture
def queue_client(queue_coordinator: MemoryCoordinator) -> Iterator[TestClient]:
    with TestClient(create_app(coordinator=queue_coordinator)) as test_client:
        yield test_client


def end(client: TestClient, who: str, session: str, turns: list[dict[str, str]] = KEYBOARD) -> dict[str, Any]:
    appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert appended.status_code == 200, appended.text
    # ?wait=0: queued at once (without it a lone client's end waits for its episode: test_end_idle_wait.py)
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200, ended.text
    return ended.json()


def search_ids(client: TestClient, who: str, query: str = "QZ-4417 keyboard") -> list[str]:
    found = client.get("/api/memory/search", params={"q": query}, headers=user(who))
    assert found.status_code == 200, found.text
    return [hit["id"] for hit in found.json()["results"]]


def queue_health(client: TestClient) -> dict[str, Any]:
    return client.get("/health").json()["checks"]["ingest-queue"]


def test_session_end_is_queued_and_the_api_worker_makes_it_searchable(settings: Settings) -> None:
    """The default server set-up: queue mode with the API's own worker thread."""
    coord = MemoryCoordinator(settings.with_overrides(ingest_mode="queue"))
    try:
        with TestClient(create_app(coordinator=coord)) as client:
            ended = end(client, "ana", "chat")
            assert ended["status"] == "queued"
            assert ended["saved"] is True and ended["episode"] is None
            assert ended["turnsAccepted"] == 4
            assert ended["queuePosition"] == 1
            assert ended["episodeId"].startswith("ep-")
            deadline = time.monotonic() + 60
            while ended["episodeId"] not in search_ids(client, "ana"):
                assert time.monotonic() < deadline, "the worker never stored the episode"
                time.sleep(0.2)
            assert search_ids(client, "ana")[:1] == [ended["episodeId"]]
            while queue_health(client)["done"] < 1:  # searchable before the worker acknowledges the job
                assert time.monotonic() < deadline, "the worker never acknowledged the job"
                time.sleep(0.1)
            check = queue_health(client)
            assert (check["mode"], check["depth"], check["done"], check["workerInProcess"]) == ("queue", 0, 1, True)
            assert check["workersAlive"] >= 1 and check["healthy"] is True
            # the session is gone from the API (its turns live in the queue job, then the episode)
            assert client.get("/api/memory/sessions/chat", headers=user("ana")).status_code == 404
        assert not coord.worker, "the app's shutdown stops its worker thread"
    finally:
        coord.close()


def test_inline_mode_answers_done_with_the_episode(client: TestClient) -> None:
    ended = end(client, "bo", "chat")
    assert (ended["status"], ended["episodeId"], ended["queuePosition"]) == ("done", ended["episode"]["id"], None)
    assert search_ids(client, "bo")[:1] == [ended["episodeId"]]


def test_wait_returns_the_stored_episode(queue_settings: Settings) -> None:
    coord = MemoryCoordinator(queue_settings.with_overrides(ingest_worker=True))
    try:
        with TestClient(create_app(coordinator=coord)) as client:
            client.post("/api/memory/sessions/w/turns", json={"turns": KEYBOARD}, headers=user("cy"))
            ended = client.post("/api/memory/sessions/w/end", params={"wait": 60}, headers=user("cy")).json()
            assert ended["status"] == "done"
            assert ended["episode"]["id"] == ended["episodeId"]
            assert search_ids(client, "cy")[:1] == [ended["episodeId"]]
    finally:
        coord.close()


def test_health_shows_the_depth_and_a_missing_worker(
    queue_client: TestClient, monkeypatch: pytest.MonkeyPatch, queue_settings: Settings
) -> None:
    first = end(queue_client, "dee", "one")
    second = end(queue_client, "dee", "two", [{**t, "content": t["content"] + " (again)"} for t in KEYBOARD])
    assert (first["queuePosition"], second["queuePosition"]) == (1, 2)
    assert first["searchableInS"] is None  # no worker alive: no honest estimate
    check = queue_health(queue_client)
    assert (check["depth"], check["workersAlive"], check["healthy"]) == (2, 0, False)
    assert "no worker" in check["reason"]
    assert check["oldestAgeS"] >= 0
    assert search_ids(queue_client, "dee") == []
    # `agtos worker --once`, a separate process's command, works the queue off
    for name, value in {
        "REDIS_URL": queue_settings.redis_url,
        "AGTOS_KEY_PREFIX": queue_settings.key_prefix,
        "AGTOS_DATA_DIR": str(queue_settings.data_dir),
        "AGTOS_CONFIG_DIR": str(queue_settings.config_dir),
        "AGTOS_INGEST_MODE": "queue",
    }.items():
        monkeypatch.setenv(name, str(value))
    result = CliRunner().invoke(cli_app, ["worker", "--once"])
    assert result.exit_code == 0, result.output
    assert "handled 2 job(s)" in result.output
    check = queue_health(queue_client)
    assert (check["depth"], check["oldestAgeS"], check["done"], check["healthy"]) == (0, None, 2, True)
    assert set(search_ids(queue_client, "dee")) == {first["episodeId"], second["episodeId"]}


def test_a_job_that_crashes_after_storing_is_retried_and_stored_once(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator
) -> None:
    """The first attempt dies after the episode was written (before the ack): the retry re-runs the
    job and the episode, its memories and its turns exist once."""
    gate = queue_coordinator.services.query_ingest
    real, calls = gate.mark_interaction_saved, []

    def crash_first(user_id: str, session_id: str) -> None:
        calls.append(session_id)
        if len(calls) == 1:
            raise RuntimeError("worker killed mid-job")
        real(user_id, session_id)

    gate.mark_interaction_saved = crash_first  # type: ignore[method-assign]
    ended = end(queue_client, "eve", "chat")
    worker = queue_coordinator.ingest_worker()
    assert worker.run_once(block=False) == 1  # attempt 1: stored, then crashed
    assert queue_health(queue_client)["depth"] == 1  # not acknowledged: still queued
    assert worker.run_once(block=False) == 1  # attempt 2 (reclaimed): done
    assert calls == ["chat", "chat"]
    check = queue_health(queue_client)
    assert (check["depth"], check["done"], check["retries"], check["deadLetters"]) == (0, 1, 1, 0)
    episodes = queue_client.get("/api/memory/episodes", headers=user("eve")).json()["episodes"]
    assert [e["id"] for e in episodes] == [ended["episodeId"]]
    assert search_ids(queue_client, "eve").count(ended["episodeId"]) == 1
    texts = [m.text for m in queue_coordinator.search_memories("eve", "tactile switches keyboard", limit=50)]
    assert texts and len(texts) == len(set(texts))


def test_a_job_that_always_fails_goes_to_the_dead_letters(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator
) -> None:
    def broken(user_id: str, session_id: str) -> None:
        raise RuntimeError("summariser exploded")

    queue_coordinator.services.query_ingest.mark_interaction_saved = broken  # type: ignore[method-assign]
    end(queue_client, "fay", "chat")
    worker = queue_coordinator.ingest_worker()
    assert [worker.run_once(block=False) for _ in range(4)] == [1, 1, 1, 0]  # 3 attempts (max), then nothing
    check = queue_health(queue_client)
    assert (check["depth"], check["deadLetters"], check["retries"]) == (0, 1, 2)
    [dead] = queue_coordinator.ingest_queue.dead_letters()
    assert dead["deliveries"] == "3"
    assert dead["error"] == "RuntimeError: summariser exploded"


def test_a_dead_consumers_pending_job_is_reclaimed(queue_settings: Settings, queue_client: TestClient) -> None:
    coord = MemoryCoordinator(queue_settings.with_overrides(ingest_claim_idle_s=0.3))
    try:
        ended = end(queue_client, "gus", "chat")
        # a worker took the job and died before acknowledging it
        [taken] = coord.ingest_queue.read("dead-worker", 1, 0)
        worker = coord.ingest_worker()
        assert worker.run_once(block=False) == 0  # still fresh: another worker may be on it
        time.sleep(0.4)
        assert worker.run_once(block=False) == 1
        assert queue_health(queue_client)["depth"] == 0
        assert search_ids(queue_client, "gus")[:1] == [ended["episodeId"]]
        assert taken.deliveries == 1
    finally:
        coord.close()


def test_maintain_answers_202_within_a_second_during_an_active_session(coordinator: MemoryCoordinator) -> None:
    """The sweep waits for the ResourceGuard off the request; shutting the app down does not wait
    it out (default 3 x 60 s): the run checks once more and is recorded deferred, with why."""
    with TestClient(create_app(coordinator=coordinator)) as client:
        appended = client.post("/api/memory/sessions/live/turns", json={"turns": KEYBOARD[:1]}, headers=user("hal"))
        assert appended.status_code == 200
        started = time.monotonic()
        response = client.post("/api/memory/maintain", headers=user("hal"))
        assert response.status_code == 202
        assert time.monotonic() - started < 1.0
        time.sleep(0.5)  # the run has started and is waiting out the guard
        closing = time.monotonic()
    assert time.monotonic() - closing < 30.0
    run = coordinator.maintenance.get_run("hal", response.json()["runId"])
    assert run is not None and run.status == "deferred"
    assert run.report is not None and "active-session" in run.report.summary["reasons"]


def test_serve_defaults_to_the_queue_with_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """``agtos serve`` (``make run``) hands uvicorn queue mode with no worker thread in the API and runs
    its worker child process; ``--worker thread`` puts a thread in the API instead; ``--ingest-mode
    inline`` and ``--no-worker`` run neither; the process environment is restored afterwards
    (tests/test_serve_worker_process.py runs the real child)."""
    from contextlib import nullcontext

    import uvicorn

    import agtos.cli

    seen: list[tuple[str | None, str | None]] = []
    children: list[bool] = []
    monkeypatch.delenv("AGTOS_INGEST_MODE", raising=False)
    monkeypatch.delenv("AGTOS_INGEST_WORKER", raising=False)
    monkeypatch.delenv("AGTOS_SERVE_WORKER", raising=False)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never reached: uvicorn is not run
    monkeypatch.setattr(agtos.cli, "worker_child", lambda run: children.append(run) or nullcontext())
    monkeypatch.setattr(
        uvicorn,
        "run",
        lambda *a, **k: seen.append((os.environ.get("AGTOS_INGEST_MODE"), os.environ.get("AGTOS_INGEST_WORKER"))),
    )
    inline, thread = ["serve", "--ingest-mode", "inline"], ["serve", "--worker", "thread"]
    for args in (["serve"], inline, ["serve", "--no-worker"], thread):
        assert CliRunner().invoke(cli_app, args).exit_code == 0
    assert seen == [("queue", "false"), ("inline", None), ("queue", "false"), ("queue", "true")]
    assert children == [True, False, False, False]
    assert "AGTOS_INGEST_MODE" not in os.environ


def test_settings_read_the_ingest_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGTOS_INGEST_MODE", "QUEUE")
    monkeypatch.setenv("AGTOS_INGEST_MAX_ATTEMPTS", "7")
    read = Settings.from_env()
    assert (read.ingest_mode, read.ingest_max_attempts, Settings().ingest_mode) == ("queue", 7, "inline")


# -- the embedded Redis shared by separate processes -----------------------------------------
def embedded_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("AGTOS_DATA_DIR", str(data_dir))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(data_dir / "config"))
    monkeypatch.setenv("AGTOS_KEY_PREFIX", "shared")


def test_a_worker_without_redis_url_uses_the_running_embedded_redis_and_leaves_it_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agtos.storage.redis_conn import EmbeddedRedis, _socket_answers

    embedded_env(monkeypatch, tmp_path / "data")
    refused = CliRunner().invoke(cli_app, ["worker", "--once"])
    assert refused.exit_code == 2 and "start `agtos serve` first" in refused.output
    assert not (tmp_path / "data" / "redis").exists()  # it started no server of its own

    server = EmbeddedRedis(tmp_path / "data" / "redis")  # what `agtos serve` runs
    try:
        result = CliRunner().invoke(cli_app, ["worker", "--once"])
        assert result.exit_code == 0, result.output
        assert "handled 0 job(s)" in result.output
        assert _socket_answers(server.socket_path)  # the worker left the API's Redis running
    finally:
        server.stop()


def test_serve_with_several_workers_shares_one_embedded_redis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """uvicorn's worker processes get the socket of one embedded Redis the serving process owns."""
    import uvicorn

    from agtos.storage.redis_conn import _socket_answers

    embedded_env(monkeypatch, tmp_path / "data")
    seen: list[str | None] = []

    def fake_run(*args: Any, **kwargs: Any) -> None:
        url = os.environ.get("REDIS_URL")
        seen.append(url)
        if url:
            assert _socket_answers(url.removeprefix("unix://"))

    monkeypatch.setattr(uvicorn, "run", fake_run)
    assert CliRunner().invoke(cli_app, ["serve", "--workers", "2", "--no-worker"]).exit_code == 0
    # one process with its worker thread owns its own, as before (the worker child shares it:
    # tests/test_serve_worker_process.py)
    assert CliRunner().invoke(cli_app, ["serve", "--worker", "thread"]).exit_code == 0
    assert seen[0] is not None and seen[0].startswith("unix://") and seen[1] is None
    assert "REDIS_URL" not in os.environ
    assert not _socket_answers(seen[0].removeprefix("unix://"))  # stopped when serve returned
