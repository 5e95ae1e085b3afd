"""README settings whose effect no test watched through the public path with the variable in the environment.

Their behaviour was tested with ``Settings`` objects passed to ``create_app`` and their reading with
``Settings.from_env()`` apart (tests/test_auth.py, test_cors.py, test_embedder_breaker.py,
test_ingest_queue.py); here each variable is set in the environment, the app is built as ``agtos
serve`` builds it, and the README's promise is checked through HTTP, next to the default's behaviour:
``AGTOS_ALLOWED_HOSTS``, ``AGTOS_AUTH``, ``AGTOS_CORS_ORIGINS``, ``AGTOS_IMPORT_ENABLED``,
``AGTOS_EMBEDDING_QUERY_TIMEOUT_S``, ``AGTOS_EMBEDDING_BREAKER_FAILURES`` / ``_BREAKER_COOLDOWN_S`` and
``AGTOS_INGEST_MAX_ATTEMPTS``, ``AGTOS_WORKER_YIELD_MAX_S``; and ``agtos mcp``'s ``AGTOS_URL``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from agtos.memory.ingest_worker import SessionJob
from agtos.serving.app import create_app
from tests import test_env_settings
from tests.helpers import delete_prefix, served_by_uvicorn, talk, user
from tests.stub_servers import StubModelServer
from tests.test_end_idle_wait import held, queue_check, until_alive
from tests.test_env_settings import HIKE, Serve, coordinator_of, search
from tests.test_mcp_server import ROOT, call
from tests.test_readme_promises_limits import QUEUE, end_queued

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

FOREIGN = "Host 'memory.example.com:443' is not served here; add it to AGTOS_ALLOWED_HOSTS"
APP = "https://app.example.com"


# -- where the embedded Redis keeps its data ------------------------------------------------------
def test_data_dir_holds_the_embedded_redis_aof(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """README: ``REDIS_URL`` unset → embedded; ``AGTOS_DATA_DIR`` is where the embedded Redis keeps its AOF."""
    env.delenv("REDIS_URL")
    env.setenv("AGTOS_DATA_DIR", str(tmp_path / "elsewhere"))
    with TestClient(create_app()) as client:
        assert client.get("/health").json()["tiers"]["episodic"]["redis"]["mode"] == "embedded"
        turns = {"turns": [{"role": "user", "content": "Ana drinks green tea"}]}
        assert client.post("/api/memory/sessions/s/turns", json=turns, headers=user("ana")).status_code == 200
    assert list((tmp_path / "elsewhere" / "redis").glob("appendonly*"))
    assert not (tmp_path / "data").exists()  # the env fixture's own data dir was not used


# -- the HTTP guard ----------------------------------------------------------------------------
def test_allowed_hosts_replace_the_loopback_names(serve: Serve) -> None:
    """README: ``Host`` names served (others: 400), default ``localhost,127.0.0.1,::1,testserver``; ``*`` for any."""
    named = {"Host": "memory.example.com:443"}
    with serve() as client:
        refused = client.get("/health", headers=named)
        assert (refused.status_code, refused.json()) == (400, {"message": FOREIGN})
        assert client.get("/health").status_code == 200  # testserver
    with serve(AGTOS_ALLOWED_HOSTS="Memory.Example.com, 10.0.0.7") as client:
        assert client.get("/health", headers=named).status_code == 200
        assert client.get("/health", headers={"Host": "10.0.0.7"}).status_code == 200
        assert client.get("/health").status_code == 400  # testserver is no longer listed
    with serve(AGTOS_ALLOWED_HOSTS="*") as client:
        assert client.get("/health", headers={"Host": "whatever.example"}).status_code == 200


def test_auth_required_asks_for_a_key_before_any_exists(serve: Serve) -> None:
    """README: ``auto``: API keys required once one exists; ``required``: always."""
    with serve() as client:
        assert client.get("/api/memory/episodes", headers=user("kim")).status_code == 200
    with serve(AGTOS_AUTH="required") as client:  # twice: the second may skip the key check when auth is off
        statuses = [client.get("/api/memory/episodes", headers=user("kim")).status_code for _ in range(2)]
        assert statuses == [401, 401]


def preflight(origin: str) -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-user-id"}


def test_cors_origins_grant_the_listed_origins_only(serve: Serve) -> None:
    """README: browser origins allowed cross-origin; unset: preflights get 405."""
    path = "/api/memory/sessions/s1/turns"
    with serve() as client:
        assert client.options(path, headers=preflight(APP)).status_code == 405
    with serve(AGTOS_CORS_ORIGINS=f"{APP}, http://localhost:5173") as client:
        granted = client.options(path, headers=preflight(APP))
        assert granted.status_code == 200 and granted.headers["access-control-allow-origin"] == APP
        turns = {"turns": [{"role": "user", "content": "hello"}]}
        write = client.post(path, json=turns, headers={**user("cora"), "Origin": APP})
        assert write.status_code == 200 and write.headers["access-control-allow-origin"] == APP
        other = client.options(path, headers=preflight("https://evil.example"))
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_import_enabled_is_off_by_default(serve: Serve) -> None:
    """README: ``false``; ``true`` allows ``GET /sources`` and ``POST /import`` (service keys only).
    tests/test_env_settings.py::test_import_home checks ``true`` with a service key; here the default."""
    with serve() as client:
        key = CliRunner().invoke(cli_app, ["keys", "create", "--service", "ops"]).stdout.strip()
        off = client.get("/api/memory/sources", headers={"Authorization": f"Bearer {key}"})
        assert off.status_code == 403 and "AGTOS_IMPORT_ENABLED" in off.json()["message"]
    with serve(AGTOS_IMPORT_ENABLED="true") as client:
        assert client.get("/api/memory/sources", headers={"Authorization": f"Bearer {key}"}).status_code == 200


# -- a remote embedder's query bound and circuit breaker ----------------------------------------
def remote_embedder(stub: StubModelServer) -> dict[str, str]:
    return {"AGTOS_EMBEDDING_PROVIDER": "ollama", "AGTOS_EMBEDDING_BASE_URL": stub.url, "AGTOS_EMBEDDING_MODEL": "e"}


def match_types(client: TestClient, query: str) -> list[str]:
    return [hit["matchType"] for hit in search(client, query)]


def test_embedding_query_timeout_s_bounds_a_searchs_wait(serve: Serve) -> None:
    """README: 2 s, the longest wait on a remote embedder before the search answers from BM25. An
    embedder answering in 1 s: the default waits for it (a hybrid hit); 0.3 s does not (keyword)."""
    with StubModelServer() as stub:
        with serve(**remote_embedder(stub)) as client:
            talk(client, "hiker", "hike", *HIKE)
            stub.delay_s = 1.0
            assert match_types(client, "Swiss Alps mountain huts") == ["hybrid"]
        stub.delay_s = 0.0
        with serve(**remote_embedder(stub), AGTOS_EMBEDDING_QUERY_TIMEOUT_S="0.3") as client:
            assert match_types(client, "Swiss Alps") == ["hybrid"]  # the dimension probe, answered at once
            stub.delay_s = 1.0
            started = time.monotonic()
            assert match_types(client, "mountain huts") == ["keyword"]
            assert time.monotonic() - started < 1.0


def calls(stub: StubModelServer, search_once: Callable[[], Any]) -> tuple[Any, int]:
    """What ``search_once()`` answered, and how many embedding requests it made."""
    before = len(stub.requests_to("/api/embed"))
    return search_once(), len(stub.requests_to("/api/embed")) - before


def test_embedding_breaker_failures_and_cooldown(serve: Serve) -> None:
    """README: 2 / 10 s: this many failed calls in a row make every call fail at once for the
    cool-down, then one trial call decides. Each search below embeds one new query."""
    with StubModelServer() as stub:
        with serve(**remote_embedder(stub)) as client:  # the defaults
            talk(client, "hiker", "hike", *HIKE)
            stub.fail_next(500, times=2, path_suffix="/api/embed")
            assert calls(stub, lambda: match_types(client, "Swiss Alps")) == (["keyword"], 1)
            assert calls(stub, lambda: match_types(client, "mountain huts")) == (["keyword"], 1)  # opens it
            time.sleep(0.6)  # the stub answers again; the cool-down is not over
            assert calls(stub, lambda: match_types(client, "Alps huts")) == (["keyword"], 0)
        variables = {"AGTOS_EMBEDDING_BREAKER_FAILURES": "1", "AGTOS_EMBEDDING_BREAKER_COOLDOWN_S": "0.5"}
        with serve(**remote_embedder(stub), **variables) as client:
            assert match_types(client, "Swiss huts") == ["hybrid"]  # the dimension probe
            stub.fail_next(500, times=1, path_suffix="/api/embed")
            assert calls(stub, lambda: match_types(client, "Swiss mountain")) == (["keyword"], 1)  # opens it
            assert calls(stub, lambda: match_types(client, "huts in the Alps")) == (["keyword"], 0)
            time.sleep(0.6)
            assert calls(stub, lambda: match_types(client, "Alps mountain")) == (["hybrid"], 1)  # the trial call


# -- the ingestion queue -------------------------------------------------------------------------
def dead_letters(client: TestClient) -> int:
    return int(client.get("/health").json()["checks"]["ingest-queue"]["deadLetters"])


def always_failing(job: SessionJob) -> object:
    raise RuntimeError("embedder not loaded yet")


def test_ingest_max_attempts_dead_letters_a_failing_job(serve: Serve) -> None:
    """README: 5 deliveries of a failing job before it goes to the dead letters (here 2; retried at once)."""
    retry_now = {"AGTOS_INGEST_RETRY_DELAY_S": "0"}
    with serve(**QUEUE, **retry_now, AGTOS_INGEST_MAX_ATTEMPTS="2") as client:
        end_queued(client, "ada")
        worker = coordinator_of(client).ingest_worker()
        worker.handle = always_failing
        assert [worker.run_once(block=False) for _ in range(3)] == [1, 1, 0]
        assert dead_letters(client) == 1
    with serve(**QUEUE, **retry_now) as client:  # the default: still handed back after three failures
        end_queued(client, "bob")
        worker = coordinator_of(client).ingest_worker()
        worker.handle = always_failing
        assert [worker.run_once(block=False) for _ in range(4)] == [1, 1, 1, 1]
        assert dead_letters(client) == 1


def test_worker_yield_max_s_caps_the_wait_for_requests_in_flight(serve: Serve) -> None:
    """README: 2 s (0: never): the API's worker thread waits while requests are in flight, at most this
    long per batch. A request held open: with the default the job is stored while it is still open;
    with 30 s it is still queued 4 s later, and stored once the request is done."""
    thread = {"AGTOS_INGEST_MODE": "queue", "AGTOS_INGEST_WORKER": "true", "AGTOS_END_IDLE_WAIT_S": "0"}
    for cap, who in ((None, "yan"), ("30", "zoe")):
        with serve(**thread | ({"AGTOS_WORKER_YIELD_MAX_S": cap} if cap else {})) as client:
            app: FastAPI = client.app
            until_alive(client)
            with held(client, app):
                end_queued(client, who)
                if cap:
                    time.sleep(4)
                    assert queue_check(client)["depth"] == 1  # still yielding to the held request
                else:
                    until_stored(client)
            until_stored(client)


def until_stored(client: TestClient, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while queue_check(client)["depth"]:
        assert time.monotonic() < deadline, "the queued session end was never stored"
        time.sleep(0.1)


# -- agtos mcp: the API it calls ---------------------------------------------------------------
def test_mcp_url_names_the_api_it_calls(env: Any, redis_url: str, key_prefix: str) -> None:
    """README: "With ``--url`` / ``AGTOS_URL`` it calls that API; without, the API runs in process".
    The stdio server's own environment names another key prefix: a memory it remembers is in the
    API's namespace only if it went through AGTOS_URL (tests/test_mcp_server.py passes ``--url``)."""
    elsewhere = f"{key_prefix}-mcp"
    with served_by_uvicorn(create_app()) as port:
        url = f"http://127.0.0.1:{port}"
        variables = {"AGTOS_URL": url, "AGTOS_USER_ID": "uma", "AGTOS_KEY_PREFIX": elsewhere}
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "agtos.cli", "mcp"], cwd=ROOT, env={**os.environ, **variables}
        )

        async def remember() -> None:
            async with Client(params, cache=None) as mcp:
                await call(mcp, "remember", text="Uma keeps her bike in the hallway", kind="fact")

        try:
            asyncio.run(remember())
        finally:
            delete_prefix(redis_url, elsewhere)
        listed = httpx.get(f"{url}/api/memory/memories", headers=user("uma")).json()["memories"]
    assert [m["text"] for m in listed] == ["Uma keeps her bike in the hallway"]
