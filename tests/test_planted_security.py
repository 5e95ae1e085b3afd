"""Issue 20 on the issue-15 safety code: tests written for the realistic bugs that a planting run
(docs/testing.md, "Planted bugs outside the mutation core") left alive in the auth, rate-limit,
body-limit, import and durable-queue paths. Each test goes through HTTP (the app) or the CLI on a
real Redis, and names in its docstring the planted bug it kills; expected values are literals
from the issue and the README (1 s of "auth off", 429 with whole seconds, 1 MiB, 15 s heartbeats).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import SessionJob
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore
from agtos.storage.redis_conn import StorageUnavailable
from tests.helpers import user
from tests.redis_process import RedisProcess
from tests.test_auth import AppFor, app_for, bearer, store_of  # noqa: F401 - app_for: a fixture
from tests.test_ingest_queue import KEYBOARD, queue_health

TURN = {"turns": [{"role": "user", "content": "My bike lock code is in the green notebook."}]}


# -- auth: fail closed, origins, media types ---------------------------------------------------------


def test_a_process_that_never_reached_redis_fails_closed(tmp_path: Path) -> None:
    """Keys exist, Redis dies before this process asked whether auth is on: 503, never served open.
    (Planted: the outage fallback taking "never asked" (None) for "auth off".)"""
    server = RedisProcess(tmp_path / "redis").start()
    try:
        settings = Settings(redis_url=server.url, key_prefix="never-asked", data_dir=tmp_path, redis_timeout_s=0.3)
        writer = MemoryCoordinator(settings)
        key, _ = ApiKeyStore(writer.connector, writer.keys).create("user", "alice")
        writer.close()
        coordinator = MemoryCoordinator(settings)
        with TestClient(create_app(coordinator=coordinator)) as client:
            server.kill()
            for headers in ({}, user("alice"), bearer(key)):
                down = client.get("/api/memory/episodes", headers=headers)
                assert down.status_code == 503, (headers, down.text)
            assert client.post("/api/memory/sessions/s1/turns", json=TURN, headers=user("alice")).status_code == 503
        coordinator.close()
    finally:
        server.stop()


def test_another_port_of_the_same_host_is_another_origin(client: TestClient) -> None:
    """A page on ``http://testserver:8080`` is cross-site for the API on ``testserver`` (port 80).
    (Planted: the Origin compared by host name only.)"""
    assert client.post("/api/memory/sessions/s1/turns", json=TURN, headers=user("kim")).status_code == 200
    for origin in ("http://testserver:8080", "http://testserver.evil.example", "null"):
        cross = client.post("/api/memory/sessions/s1/end", headers={**user("kim"), "Origin": origin})
        assert cross.status_code == 403, origin
    assert client.get("/api/memory/sessions/s1", headers=user("kim")).status_code == 200  # not ended


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"]
)
def test_json_bodies_pass_the_write_guard_with_parameters_and_suffixes(client: TestClient, content_type: str) -> None:
    """JSON is JSON with a charset, in any case, or as a ``+json`` type. (Planted: the media check by ``==``.)"""
    sent = client.post(
        "/api/memory/sessions/s2/turns",
        content=b'{"turns": [{"role": "user", "content": "I water the ferns on Sundays."}]}',
        headers={**user("lou"), "Content-Type": content_type},
    )
    assert sent.status_code == 200, sent.text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/api/memory/memories/m-1"),
        ("PUT", "/api/memory/privacy"),
        ("PATCH", "/api/memory/profile"),
        ("DELETE", "/api/entities/e-1"),
    ],
)
def test_every_state_changing_method_is_guarded_cross_site(client: TestClient, method: str, path: str) -> None:
    """Refused before routing (403, not 404/405/422). (Planted: a method left out of the write methods.)"""
    refused = client.request(method, path, headers={**user("max"), "Origin": "https://evil.example"})
    assert refused.status_code == 403, refused.text
    assert "cross-site" in refused.json()["message"]


def test_a_service_key_with_an_empty_user_header_is_400(client: TestClient) -> None:
    """An empty ``X-User-Id`` names nobody: never the service's own name or the default user.
    (Planted: ``x_user_id or <service name>``.)"""
    service, _ = store_of(client).create("service", "backend")
    named = client.post("/api/memory/sessions/s1/turns", json=TURN, headers=bearer(service, **user("backend")))
    assert named.status_code == 200  # a user who happens to share the service's name
    empty = client.get("/api/memory/sessions/s1", headers=bearer(service, **user("")))
    assert empty.status_code == 400, empty.text


def test_imports_are_refused_while_auth_is_off_even_when_enabled(app_for: AppFor, tmp_path: Path) -> None:  # noqa: F811
    """AGTOS_IMPORT_ENABLED alone never opens the import routes: they need a service key.
    (Planted: ``require_service`` letting an unauthenticated caller through.)"""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("# Notes\n\n- I prefer tabs over spaces.\n")
    opened = app_for(import_home=home, import_enabled=True)
    listed = opened.get("/api/memory/sources")
    assert listed.status_code == 403 and "service key" in listed.json()["message"]
    imported = opened.post("/api/memory/import", json={}, headers=user("ivy"))
    assert imported.status_code == 403
    assert opened.get("/api/memory/memories", headers=user("ivy")).json()["memories"] == []


def test_a_bare_ipv6_loopback_host_is_served(client: TestClient) -> None:
    """``::1`` is in the default allow-list with or without brackets and port.
    (Planted: every ``:`` read as a port separator.)"""
    for host in ("::1", "[::1]", "[::1]:4102"):
        assert client.get("/health", headers={"Host": host}).status_code == 200, host


# -- keys: hashed, compared in constant time, drawn again on an id collision ---------------------------


def test_a_key_is_checked_against_its_sha256_with_compare_digest(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored digest is the SHA-256 of the whole key and the comparison is ``hmac.compare_digest``.
    (Planted: a plain ``!=`` compare; a digest of part of the key.)"""
    key, record = store_of(client).create("user", "nia")
    assert record.digest == hashlib.sha256(key.encode()).hexdigest()
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert client.get("/api/memory/episodes", headers=bearer(key)).status_code == 200
    forged = key[:-2] + ("zz" if not key.endswith("zz") else "yy")
    assert client.get("/api/memory/episodes", headers=bearer(forged)).status_code == 401
    expected = [hashlib.sha256(k.encode()).hexdigest() for k in (key, forged)]
    assert compared == [(record.digest, expected[0]), (record.digest, expected[1])]


def test_an_id_collision_draws_a_new_id_and_both_keys_work(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Planted: the collision branch returning the unstored key.)"""
    ids, real = iter(["aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"]), secrets.token_hex
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(ids) if n == 6 else real(n))  # 6 bytes: a key id
    store = store_of(client)
    first, _ = store.create("user", "ola")
    second, record = store.create("user", "pia")
    assert record.id == "bbbbbbbbbbbb" and second.startswith("agt_bbbbbbbbbbbb_")
    assert client.get("/api/memory/episodes", headers=bearer(first)).status_code == 200
    assert client.get("/api/memory/episodes", headers=bearer(second)).status_code == 200


# -- rate limits: refill, expiry, per key, 0 = off ------------------------------------------------------


def test_an_empty_bucket_refills_at_the_rate_not_faster(app_for: AppFor) -> None:  # noqa: F811
    """Rate 0.25/s, burst 2: the third call waits 4 s; 1.5 s later a token is still missing.
    (Planted: the refill 10x too fast; a bucket that expires (refilled whole) after 1 s idle.)"""
    client = app_for(rate_limit_per_s=0.25, rate_limit_burst=2)
    key, _ = store_of(client).create("user", "quinn")
    assert [client.get("/api/memory/episodes", headers=bearer(key)).status_code for _ in range(2)] == [200, 200]
    limited = client.get("/api/memory/episodes", headers=bearer(key))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "4"
    time.sleep(1.5)
    still = client.get("/api/memory/episodes", headers=bearer(key))
    assert still.status_code == 429
    assert still.headers["retry-after"] in ("1", "2", "3")  # 4 s minus the 1.5 s (and the calls' time) waited


def test_an_idle_bucket_refills_to_the_burst_and_no_further(app_for: AppFor) -> None:  # noqa: F811
    """Rate 2/s, burst 2: one call leaves 1 token; 1.1 s later the bucket (still alive: it expires
    1 s after it would be full) holds 2 tokens, not 3. A slow machine, where the calls take long,
    weakens this test, never fails it. (Planted: the refill clamped at burst + 1.)"""
    client = app_for(rate_limit_per_s=2.0, rate_limit_burst=2)
    key, _ = store_of(client).create("user", "rex")
    assert client.get("/api/memory/episodes", headers=bearer(key)).status_code == 200
    time.sleep(1.1)
    started, allowed = time.monotonic(), 0
    while client.get("/api/memory/episodes", headers=bearer(key)).status_code == 200 and allowed < 20:
        allowed += 1
    took = time.monotonic() - started
    assert allowed <= 2 + took * 2.0, (allowed, took)  # the 2 stored tokens, plus what refilled meanwhile


def test_two_keys_of_one_user_have_two_buckets(app_for: AppFor) -> None:  # noqa: F811
    """The limit is per API key, not per user. (Planted: the bucket named by the key's user.)"""
    client = app_for(rate_limit_per_s=0.01, rate_limit_burst=1)
    store = store_of(client)
    laptop, _ = store.create("user", "rui")
    phone, _ = store.create("user", "rui")
    assert client.get("/api/memory/episodes", headers=bearer(laptop)).status_code == 200
    assert client.get("/api/memory/episodes", headers=bearer(laptop)).status_code == 429
    assert client.get("/api/memory/episodes", headers=bearer(phone)).status_code == 200


def test_a_rate_of_zero_switches_the_limit_off(app_for: AppFor) -> None:  # noqa: F811
    """AGTOS_RATE_LIMIT_PER_S=0: no limit (README). (Planted: ``<= 0`` read as ``< 0``.)"""
    client = app_for(rate_limit_per_s=0.0, rate_limit_burst=1)
    key, _ = store_of(client).create("user", "sam")
    assert [client.get("/api/memory/episodes", headers=bearer(key)).status_code for _ in range(4)] == [200] * 4


# -- body size limit: exactly the limit passes, one byte more is a 413, body or no body ----------------


def _turn_body(size: int) -> bytes:
    head, tail = b'{"turns": [{"role": "user", "content": "', b'"}]}'
    return head + b"w" * (size - len(head) - len(tail)) + tail


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_of_exactly_the_limit_passes_and_one_byte_more_is_413(app_for: AppFor, chunked: bool) -> None:  # noqa: F811
    """(Planted: ``>`` read as ``>=`` on the declared and on the counted length.)"""
    client = app_for(max_body_bytes=300)

    def send(body: bytes) -> int:
        content = iter([body[:100], body[100:]]) if chunked else body
        return client.post(
            "/api/memory/sessions/lim/turns",
            content=content,
            headers={**user("tia"), "Content-Type": "application/json"},
        ).status_code

    assert send(_turn_body(300)) == 200
    assert send(_turn_body(301)) == 413


def test_a_declared_body_over_the_limit_is_413_on_a_route_that_reads_none(app_for: AppFor) -> None:  # noqa: F811
    """The declared length is refused before the app runs, even where the route reads no body.
    (Planted: slack on the declared-length check.)"""
    client = app_for(max_body_bytes=300)
    assert client.post("/api/memory/sessions/big/turns", json=TURN, headers=user("uma")).status_code == 200
    ended = client.post(
        "/api/memory/sessions/big/end",
        content=b"{}" + b" " * 400,
        headers={**user("uma"), "Content-Type": "application/json"},
    )
    assert ended.status_code == 413
    assert client.get("/api/memory/sessions/big", headers=user("uma")).status_code == 200  # still live


# -- imports: into the named user, keys never derived from a secret ---------------------------------------


@pytest.fixture
def import_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    return home


def _import(client: TestClient, service: str, who: str) -> dict[str, object]:
    done = client.post("/api/memory/import", json={"sources": ["claude_code"]}, headers=bearer(service, **user(who)))
    assert done.status_code == 200, done.text
    return done.json()


def _memory_texts(client: TestClient, key: str, who: str) -> list[str]:
    listed = client.get("/api/memory/memories", headers=bearer(key, **user(who)))
    assert listed.status_code == 200, listed.text
    return [m["text"] for m in listed.json()["memories"]]


def test_an_import_lands_in_the_named_user_only(app_for: AppFor, import_home: Path) -> None:  # noqa: F811
    """(Planted: the import stored under the default user instead of ``X-User-Id``.)"""
    (import_home / ".claude" / "CLAUDE.md").write_text("# Notes\n\n- I prefer tabs over spaces.\n")
    client = app_for(import_home=import_home, import_enabled=True)
    service, _ = store_of(client).create("service", "ops")
    assert _import(client, service, "vic")["memoriesAdded"] == 1
    assert _memory_texts(client, service, "vic") == ["Notes: I prefer tabs over spaces."]  # the heading names the item
    assert _memory_texts(client, service, "default") == []


def test_a_rotated_secret_does_not_make_a_new_memory(app_for: AppFor, import_home: Path) -> None:  # noqa: F811
    """A memory's id comes from its redacted text: the same line with another password is the same
    memory, and nothing derived from the secret is stored. (Planted: the id hashed from the raw text.)"""
    notes = import_home / ".claude" / "CLAUDE.md"
    client = app_for(import_home=import_home, import_enabled=True)
    service, _ = store_of(client).create("service", "ops")
    for n, password in enumerate(("Qv7rLx29Tz", "Mw4kPs81Yd")):
        notes.write_text(f'# Staging\n\n- The staging database password = "{password}" for the admin user.\n')
        assert _import(client, service, "wes")["memoriesAdded"] == (1 - n)
        [text] = _memory_texts(client, service, "wes")
        assert password not in text and "[REDACTED" in text


# -- the durable ingestion queue: age, liveness, retry delay, nothing left pending -----------------------


@pytest.fixture
def queue_app(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    """Queue mode, no worker thread (the test drives the worker), failed jobs back after 1 s."""
    coordinator = MemoryCoordinator(
        settings.with_overrides(
            ingest_mode="queue", ingest_worker=False, ingest_retry_delay_s=1.0, ingest_max_attempts=3
        )
    )
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client, coordinator
    coordinator.close()


def _end(client: TestClient, who: str, session: str = "chat") -> dict[str, object]:
    appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": KEYBOARD}, headers=user(who))
    assert appended.status_code == 200, appended.text
    ended = client.post(f"/api/memory/sessions/{session}/end", headers=user(who))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text
    return ended.json()


def test_health_reports_the_oldest_jobs_age_in_seconds(queue_app: tuple[TestClient, MemoryCoordinator]) -> None:
    """(Planted: the stream id's milliseconds taken for seconds, clamped to 0.)"""
    client, _ = queue_app
    _end(client, "xia")
    time.sleep(1.2)
    check = queue_health(client)
    assert check["depth"] == 1
    assert 1.2 <= check["oldestAgeS"] < 30  # type: ignore[operator]


def test_a_worker_silent_for_more_than_15_s_is_not_alive(queue_app: tuple[TestClient, MemoryCoordinator]) -> None:
    """Workers beat every 2 s; one whose last beat is over 15 s old is gone, and queued jobs with no
    live worker make /health unhealthy. (Planted: the window 15 s -> 1500 s; every beat counted.)"""
    client, coordinator = queue_app
    _end(client, "yan")
    beats = coordinator.ingest_queue.workers_key
    coordinator.connector.run(lambda r: r.hset(beats, "crashed-worker", repr(time.time() - 16)))
    check = queue_health(client)
    assert (check["workersAlive"], check["healthy"]) == (0, False)
    coordinator.connector.run(lambda r: r.hset(beats, "busy-worker", repr(time.time() - 12)))
    check = queue_health(client)
    assert (check["workersAlive"], check["healthy"]) == (1, True)


def test_a_failed_job_comes_back_after_the_retry_delay_and_is_stored(
    queue_app: tuple[TestClient, MemoryCoordinator],
) -> None:
    """A job that fails before storing anything is handed back (not acknowledged), claimable after
    AGTOS_INGEST_RETRY_DELAY_S (1 s here, not the 120 s claim idle), then stored; nothing stays
    pending. (Planted: the ack after a failure; the retry delay arithmetic; an ack without XACK.)"""
    client, coordinator = queue_app
    ended = _end(client, "zed")
    worker = coordinator.ingest_worker()
    real, calls = worker.handle, []

    def fail_first(job: SessionJob) -> object:
        calls.append(job.session_id)
        if len(calls) == 1:
            raise RuntimeError("embedder not loaded yet")
        return real(job)

    worker.handle = fail_first
    assert worker.run_once(block=False) == 1  # failed
    assert queue_health(client)["depth"] == 1
    assert worker.run_once(block=False) == 0  # not before the delay
    time.sleep(1.2)
    assert worker.run_once(block=False) == 1  # retried: stored
    assert calls == ["chat", "chat"]
    check = queue_health(client)
    assert (check["depth"], check["done"], check["retries"], check["deadLetters"]) == (0, 1, 1, 0)
    assert [e["id"] for e in client.get("/api/memory/episodes", headers=user("zed")).json()["episodes"]] == [
        ended["episodeId"]
    ]
    stream, group = coordinator.ingest_queue.stream, "ingest-workers"
    pending = coordinator.connector.run(lambda r: r.xpending(stream, group))
    assert pending["pending"] == 0


def test_import_warnings_are_redacted_too(app_for: AppFor, import_home: Path) -> None:  # noqa: F811
    """A warning names the file it is about; a credential in that path is redacted like any text.
    (Planted: the warnings returned as found.)"""
    aws_key = "AKIAQYLPMN5HFIQR7XYZ"
    project = import_home / ".claude" / "projects" / f"-home-dev-deploy-{aws_key}"
    project.mkdir(parents=True)
    (project / "s1.jsonl").write_text('{"type": "user", "message": {"role": "user", "content": "hi there"}}\n{oops\n')
    client = app_for(import_home=import_home, import_enabled=True)
    service, _ = store_of(client).create("service", "ops")
    [warning] = _import(client, service, "ada")["warnings"]  # type: ignore[misc]
    assert "skipped 1 malformed line(s)" in warning
    assert aws_key not in warning and "[REDACTED:aws_access_key]" in warning


def test_a_dead_letter_keeps_the_sessions_turns(queue_app: tuple[TestClient, MemoryCoordinator]) -> None:
    """The session's journal is cleared once its end is queued: for a job that keeps failing, the
    dead-letter entry is the only copy of the acknowledged turns, so it keeps the whole job.
    (Planted: the dead letter written without the payload.)"""
    client, coordinator = queue_app
    ended = _end(client, "bea")
    worker = coordinator.ingest_worker()

    def broken(job: SessionJob) -> object:
        raise RuntimeError("NER model missing")

    worker.handle, worker.retry_delay_ms = broken, 0
    assert [worker.run_once(block=False) for _ in range(4)] == [1, 1, 1, 0]  # 3 attempts, then dead
    assert queue_health(client)["deadLetters"] == 1
    dead_stream = coordinator.ingest_queue.dead
    [(_, fields)] = coordinator.connector.run(lambda r: r.xrange(dead_stream))
    job = SessionJob.model_validate_json(fields[b"job"])
    assert (job.user_id, job.session_id, job.episode_id) == ("bea", "chat", ended["episodeId"])
    assert [t.content for t in job.turns] == [t["content"] for t in KEYBOARD]


def test_an_append_refused_by_a_cap_leaves_no_session_in_process(app_for: AppFor) -> None:  # noqa: F811
    """A first append refused with 413 (the user's live-session cap) creates nothing: no session to
    read, none counted in /health. (Planted: only Redis outages, not a full journal, discard it.)"""
    client = app_for(user_max_sessions=1)
    assert client.post("/api/memory/sessions/a/turns", json=TURN, headers=user("cai")).status_code == 200
    refused = client.post("/api/memory/sessions/b/turns", json=TURN, headers=user("cai"))
    assert refused.status_code == 413 and "(AGTOS_USER_MAX_SESSIONS)" in refused.json()["message"]
    assert client.get("/health").json()["tiers"]["working"]["sessions"] == 1
    assert client.get("/api/memory/sessions/b", headers=user("cai")).status_code == 404


def test_a_session_end_whose_queueing_fails_keeps_the_turns(
    queue_app: tuple[TestClient, MemoryCoordinator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis goes away between reading the journal and queueing the job: 503, the session stays
    live with its turns, and the retry queues the same episode. (Planted: the journal cleared
    before the job was queued.)"""
    client, coordinator = queue_app
    turns = client.post("/api/memory/sessions/chat/turns", json={"turns": KEYBOARD}, headers=user("dov"))
    assert turns.status_code == 200
    queue = coordinator.sessions.ingest_queue

    def down(payload: bytes) -> tuple[str, int]:
        raise StorageUnavailable("Redis went away")

    monkeypatch.setattr(queue, "enqueue", down)
    assert client.post("/api/memory/sessions/chat/end", headers=user("dov")).status_code == 503
    monkeypatch.undo()
    live = client.get("/api/memory/sessions/chat", headers=user("dov"))
    assert live.status_code == 200 and live.json()["messageCount"] == len(KEYBOARD)
    retried = client.post("/api/memory/sessions/chat/end", headers=user("dov"))
    assert retried.status_code == 200 and retried.json()["status"] == "queued"
    assert queue_health(client)["depth"] == 1


def test_waiting_for_a_queued_end_while_redis_dies_answers_queued(tmp_path: Path) -> None:
    """``?wait=S`` with Redis gone while waiting: the job is queued and the journal cleared, so the
    answer is 200 ``queued`` (no estimate), not a 503 that invites a second end. (Planted: an
    outage while waiting taken for a finished job.)"""
    server = RedisProcess(tmp_path / "redis").start()
    try:
        settings = Settings(
            redis_url=server.url,
            key_prefix="wait-down",
            data_dir=tmp_path,
            redis_timeout_s=0.3,
            ingest_mode="queue",
            ingest_worker=False,
        )
        coordinator = MemoryCoordinator(settings)
        queue = coordinator.sessions.ingest_queue
        real_contains = queue.contains

        def dies_while_waiting(entry_id: str) -> bool:
            server.kill()
            return real_contains(entry_id)

        with TestClient(create_app(coordinator=coordinator)) as client:
            appended = client.post("/api/memory/sessions/chat/turns", json={"turns": KEYBOARD}, headers=user("eli"))
            assert appended.status_code == 200
            queue.contains = dies_while_waiting  # type: ignore[method-assign]
            ended = client.post("/api/memory/sessions/chat/end", params={"wait": 5}, headers=user("eli"))
            assert ended.status_code == 200, ended.text
            assert (ended.json()["status"], ended.json()["searchableInS"]) == ("queued", None)
        coordinator.close()
    finally:
        server.stop()
