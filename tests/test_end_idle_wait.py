"""Read-your-writes for a lone client in queue mode (issues 14/15): ``POST …/end`` without ``?wait``,
the only request in flight in its API process with a worker alive, waits for its own episode
(``AGTOS_END_IDLE_WAIT_S``) and answers ``done``, so the client's next search finds the session.
Under concurrent requests, with no live worker, with ``?wait=0`` or with the variable at 0 it
answers ``queued`` at once, as before.

The apps are built from the environment the way ``agtos serve`` builds them (queue mode, its worker
thread: ``--worker thread``), and once the real ``agtos serve`` with its default worker child at
``SCHED_IDLE``; real Redis (``AGTOS_TEST_REDIS_URL``) and models; everything through HTTP.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agtos.serving.app import create_app
from tests.helpers import user

CAP = "30"  # AGTOS_END_IDLE_WAIT_S in these tests: far above what an "at once" answer may take
DEFAULT_CAP_S = 4.0  # the README's default of AGTOS_END_IDLE_WAIT_S
AT_ONCE_S = 5.0  # an end that answers at once (on this shared 2-core box) against one that waited the cap

Serve = Callable[..., AbstractContextManager[TestClient]]


def pet_turns(pet: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"I adopted a corgi named {pet} last spring and she loves the beach."},
        {"role": "assistant", "content": f"A corgi named {pet}! How old is she now?"},
        {"role": "user", "content": f"{pet} turned two in March; please remember her name."},
        {"role": "assistant", "content": f"Noted: your corgi {pet} is two."},
    ]


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path) -> Serve:
    """``serve(AGTOS_X="1")``: a client of the app ``agtos serve --worker thread`` builds from the
    environment (queue mode, a worker thread yielding to the requests in flight), no other AGTOS_*."""
    for name in list(os.environ):
        if name.startswith("AGTOS_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    base = {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_DATA_DIR": str(tmp_path / "data"),
        "AGTOS_CONFIG_DIR": str(tmp_path / "config"),
        "AGTOS_INGEST_MODE": "queue",
        "AGTOS_END_IDLE_WAIT_S": CAP,
    }

    @contextmanager
    def running(**variables: str | None) -> Iterator[TestClient]:
        for name, value in (base | variables).items():
            if value is None:  # unset: the default
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)
        with TestClient(create_app()) as client:
            yield client

    return running


def appended(client: Any, session: str, pet: str, who: str = "ann") -> None:
    sent = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": pet_turns(pet)}, headers=user(who))
    assert sent.status_code == 200, sent.text


def end(client: Any, session: str, who: str = "ann", **params: Any) -> tuple[dict[str, Any], float]:
    """The end's body and how long it took."""
    started = time.monotonic()
    ended = client.post(f"/api/memory/sessions/{session}/end", params=params, headers=user(who))
    took = time.monotonic() - started
    assert ended.status_code == 200, ended.text
    return ended.json(), took


def found(client: Any, query: str, who: str = "ann") -> list[str]:
    got = client.get("/api/memory/search", params={"q": query}, headers=user(who))
    assert got.status_code == 200, got.text
    return [hit["id"] for hit in got.json()["results"]]


def queue_check(client: Any) -> dict[str, Any]:
    return dict(client.get("/health").json()["checks"]["ingest-queue"])


def until_alive(client: TestClient) -> None:
    """The app's worker thread has beaten its first heartbeat (it does on its first pass)."""
    deadline = time.monotonic() + 30
    while not queue_check(client)["workersAlive"]:
        assert time.monotonic() < deadline, "the worker thread never beat a heartbeat"
        time.sleep(0.05)


@contextmanager
def held(client: TestClient, app: FastAPI) -> Iterator[None]:
    """A slow request in flight (``GET /hold``, open until the block ends)."""
    release, started = threading.Event(), threading.Event()

    @app.get("/hold")
    def hold() -> str:
        started.set()  # the handler runs: the in-flight middleware counts this request
        release.wait(120)
        return "released"

    thread = threading.Thread(target=client.get, args=("/hold",))
    thread.start()
    try:
        # not a comparison with the count read before: an end that stops waiting leaves the count
        # meanwhile (the suite at load 11 saw +1 -1 in that window and timed out here)
        assert started.wait(10), "the held request never started"
        yield
    finally:
        release.set()
        thread.join(30)


def test_a_lone_clients_end_is_searchable_when_it_answers(serve: Serve) -> None:
    """The worker thread yields up to 60 s to requests in flight: if the waiting end counted as
    one, it would wait for a worker that waits for it (``queued`` after the 30 s cap)."""
    with serve(AGTOS_INGEST_WORKER="true", AGTOS_WORKER_YIELD_MAX_S="60") as client:
        until_alive(client)
        for session, pet in (("s1", "Biscuit"), ("s2", "Waffles"), ("s3", "Pumpernickel")):
            appended(client, session, pet)
            body, took = end(client, session)
            assert (body["status"], body["saved"], body["queuePosition"]) == ("done", True, None), body
            assert body["episode"]["id"] == body["episodeId"] and took < float(CAP) / 2
            assert found(client, pet)[:1] == [body["episodeId"]]  # asked right after: found
        assert queue_check(client)["depth"] == 0


def test_wait_zero_answers_queued_at_once(serve: Serve) -> None:
    with serve(AGTOS_INGEST_WORKER="true") as client:
        until_alive(client)
        appended(client, "s1", "Biscuit")
        body, took = end(client, "s1", wait=0)
        assert (body["status"], body["episode"], body["queuePosition"]) == ("queued", None, 1), body
        assert took < AT_ONCE_S
        explicit, _ = end(client, "s1", wait=0)  # a second end: nothing left (the job holds the turns)
        assert explicit["reason"] == "session has no turns"


def test_an_end_beside_a_request_in_flight_answers_queued_at_once(serve: Serve) -> None:
    """Another request in flight: the end answers ``queued`` at once (the worker, yielding to the
    held request for up to 60 s, would not store it within the 30 s cap)."""
    with serve(AGTOS_INGEST_WORKER="true", AGTOS_WORKER_YIELD_MAX_S="60") as client:
        app: FastAPI = client.app  # type: ignore[assignment]
        until_alive(client)
        appended(client, "s1", "Biscuit")
        with held(client, app):
            body, took = end(client, "s1")
            assert (body["status"], body["queuePosition"]) == ("queued", 1), body
            assert took < AT_ONCE_S
        deadline = time.monotonic() + 120  # stored once the held request is gone
        while body["episodeId"] not in found(client, "Biscuit"):
            assert time.monotonic() < deadline, "the queued end was never stored"
            time.sleep(0.2)


def test_a_waiting_end_answers_queued_once_another_request_arrives(serve: Serve) -> None:
    """A worker counted alive (its heartbeat is fresh) that stores nothing: the lone end waits, and
    stops waiting as soon as another request is in flight."""
    with serve(AGTOS_INGEST_WORKER="false") as client:
        app: FastAPI = client.app  # type: ignore[assignment]
        queue = app.state.coordinator.ingest_queue
        queue.heartbeat("silent-worker")
        appended(client, "s1", "Biscuit")
        result: list[tuple[dict[str, Any], float]] = []
        ender = threading.Thread(target=lambda: result.append(end(client, "s1")))
        ender.start()
        deadline = time.monotonic() + 20
        while queue.stats()["depth"] < 1:  # queued: the end now waits (watched in Redis: a request would end it)
            assert time.monotonic() < deadline and ender.is_alive(), result
            time.sleep(0.05)
        time.sleep(1.0)
        assert ender.is_alive(), result  # still waiting for the silent worker
        with held(client, app):
            arrived = time.monotonic()
            ender.join(AT_ONCE_S)
            assert not ender.is_alive(), "the end kept waiting beside another request"
            assert time.monotonic() - arrived < AT_ONCE_S
        [(body, took)] = result
        assert body["status"] == "queued" and 1.0 < took < float(CAP), (body, took)


def test_the_default_wait_is_four_seconds(serve: Serve) -> None:
    """No AGTOS_END_IDLE_WAIT_S: a lone end beside a worker that stores nothing (a fresh heartbeat)
    waits the documented 4 s, then answers ``queued``."""
    with serve(AGTOS_INGEST_WORKER="false", AGTOS_END_IDLE_WAIT_S=None) as client:
        client.app.state.coordinator.ingest_queue.heartbeat("silent-worker")  # type: ignore[attr-defined]
        appended(client, "s1", "Biscuit")
        body, took = end(client, "s1")
        assert body["status"] == "queued", body
        assert DEFAULT_CAP_S <= took < DEFAULT_CAP_S + AT_ONCE_S


def test_no_live_worker_answers_queued_within_a_second(serve: Serve) -> None:
    with serve(AGTOS_INGEST_WORKER="false") as client:
        assert queue_check(client)["workersAlive"] == 0
        appended(client, "warm", "Biscuit")
        end(client, "warm")  # loads what an end loads: the next one is timed alone
        appended(client, "s1", "Waffles")
        body, took = end(client, "s1")
        assert (body["status"], body["searchableInS"]) == ("queued", None), body
        assert took < 1.0


def test_the_variable_at_zero_turns_the_wait_off(serve: Serve) -> None:
    with serve(AGTOS_INGEST_WORKER="true", AGTOS_END_IDLE_WAIT_S="0") as client:
        until_alive(client)
        appended(client, "s1", "Biscuit")
        body, took = end(client, "s1")
        assert (body["status"], body["episode"]) == ("queued", None), body
        assert took < AT_ONCE_S


def test_agtos_serve_default_layout_a_lone_client_reads_what_it_ended(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    """The real ``agtos serve`` (queue mode, one worker child at ``SCHED_IDLE``), as ``make run``
    starts it, with its defaults: a client that ends sessions one at a time finds each right after
    its end. The child loads its models before its first heartbeat (before, its first job loaded
    them: 7-9 s measured at load 9, past the 4 s default), so it is "alive" only once they are
    loaded; the first end may still answer ``queued`` on a slow box (a user's first index is made
    then). The client's 5 s timeout is httpx's default."""
    from tests.test_serve_worker_process import serve as agtos_serve
    from tests.test_serve_worker_process import worker_children

    env = {"REDIS_URL": redis_url, "AGTOS_KEY_PREFIX": key_prefix}
    with agtos_serve(tmp_path, env) as (proc, url), httpx.Client(base_url=url, timeout=5.0) as client:
        (child,) = worker_children(proc)  # alive in /health: the fixture waited for it
        mapped = {Path(m.path).name for m in child.memory_maps()}
        assert any("onnxruntime" in name for name in mapped), "the child took jobs before loading its embedder"
        appended(client, "warm", "Pepper")
        first, _took = end(client, "warm")
        assert first["status"] in ("done", "queued"), first
        deadline = time.monotonic() + 120
        while first["episodeId"] not in found(client, "Pepper"):  # the child's models are loaded
            assert time.monotonic() < deadline, "the worker child never stored the first session"
            time.sleep(0.3)
        for session, pet in (("s1", "Biscuit"), ("s2", "Waffles"), ("s3", "Pumpernickel")):
            appended(client, session, pet)
            body, _took = end(client, session)
            assert (body["status"], body["saved"]) == ("done", True), body
            assert found(client, pet)[:1] == [body["episodeId"]]


# Planted-bug checks (issue 20, docs/testing.md "Planted bugs outside the mutation core").


def test_a_second_end_while_one_waits_answers_queued_at_once_and_the_first_stops_waiting(serve: Serve) -> None:
    """Two clients end sessions beside a worker that stores nothing: the first waits (set aside from the
    requests in flight) and stops waiting once another request is in flight; an end sent while that
    request is still in flight is not alone, so it answers ``queued`` at once. (The second end used to be
    the request the first noticed: then the first could leave before the second asked whether it was
    alone, and the second, alone by then, waited the 30 s cap: failed under load, and after other files.
    The set-aside end counting for another's ``alone`` is tested on the counter, test_worker_yield.py.)"""
    with serve(AGTOS_INGEST_WORKER="false") as client:
        app: FastAPI = client.app  # type: ignore[assignment]
        queue = app.state.coordinator.ingest_queue
        queue.heartbeat("silent-worker")
        appended(client, "s1", "Biscuit", who="ann")
        appended(client, "s2", "Waffles", who="bob")
        result: list[tuple[dict[str, Any], float]] = []
        first = threading.Thread(target=lambda: result.append(end(client, "s1", who="ann")))
        first.start()
        deadline = time.monotonic() + 20
        while queue.stats()["depth"] < 1 or app.state.inflight.aside < 1:  # queued and set aside: it waits
            assert time.monotonic() < deadline and first.is_alive(), result
            time.sleep(0.05)
        with held(client, app):
            first.join(AT_ONCE_S)
            assert not first.is_alive(), "the first end kept waiting beside a request in flight"
            second, took = end(client, "s2", who="bob")
            assert (second["status"], second["queuePosition"]) == ("queued", 2), second
            assert took < AT_ONCE_S
        [(body, _took)] = result
        assert body["status"] == "queued", body


def test_a_lone_end_that_waited_leaves_the_in_flight_count_as_it_found_it(serve: Serve) -> None:
    """After a lone end waited for its episode (set aside, then back), the next request counts as
    one, as before it: ends beside it are not alone, and the worker thread yields to it."""
    with serve(AGTOS_INGEST_WORKER="true") as client:
        app: FastAPI = client.app  # type: ignore[assignment]

        @app.get("/probe")
        def probe() -> int:
            return int(app.state.inflight.count)

        until_alive(client)
        assert client.get("/probe").json() == 1
        appended(client, "s1", "Biscuit")
        body, _took = end(client, "s1")
        assert body["status"] == "done", body
        assert client.get("/probe").json() == 1


@pytest.mark.parametrize(
    ("params", "variables"),
    [({"wait": 0.5}, {}), ({}, {"AGTOS_END_IDLE_WAIT_S": "0.5"})],
    ids=["wait-0.5", "idle-wait-0.5"],
)
def test_a_wait_under_a_second_is_waited_out(serve: Serve, params: dict[str, Any], variables: dict[str, str]) -> None:
    """Half a second, asked (``?wait=0.5``) or configured (``AGTOS_END_IDLE_WAIT_S=0.5``), beside a
    worker that stores nothing (a fresh heartbeat): the end waits it out, then answers ``queued``."""
    with serve(AGTOS_INGEST_WORKER="false", **variables) as client:
        client.app.state.coordinator.ingest_queue.heartbeat("silent-worker")  # type: ignore[attr-defined]
        appended(client, "s1", "Biscuit")
        body, took = end(client, "s1", **params)
        assert (body["status"], body["queuePosition"]) == ("queued", 1), body
        assert 0.5 <= took < AT_ONCE_S
