"""The API's ingestion worker thread yields to requests in flight, at most AGTOS_WORKER_YIELD_MAX_S per batch.

Real Redis queue; the worker loop runs on its own thread as in ``agtos serve``. The end-to-end test
goes through the HTTP app with the real models: a request held open delays a queued session end's
ingestion by the cap, and no longer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi import Request
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import IngestWorker, SessionJob
from agtos.schemas import Turn
from agtos.serving.app import create_app
from agtos.serving.inflight import InflightCounter, waits_for_worker
from agtos.storage.ingest_queue import IngestQueue
from tests.test_ingest_queue import end, queue_health, search_ids


@pytest.fixture
def queue(settings: Settings) -> Iterator[IngestQueue]:
    coord = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    yield coord.sessions.ingest_queue
    coord.close()


def job_bytes(session: str) -> bytes:
    turn = Turn(role="user", content=f"a turn of {session}")
    return SessionJob(user_id="u", session_id=session, segment="0", turns=[turn]).model_dump_json().encode()


class Recorder:
    """The worker's ``handle``: the monotonic time each job reached it."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.done = threading.Event()

    def __call__(self, job: SessionJob) -> None:
        self.times.append(time.monotonic())
        self.done.set()


def run_worker(queue: IngestQueue, busy: Callable[[], bool] | None, cap: float) -> tuple[IngestWorker, Recorder]:
    recorder = Recorder()
    worker = IngestWorker(queue, recorder, block_s=0.1).yield_to(busy, cap).start()
    return worker, recorder


def test_a_request_set_aside_counts_for_another_requests_alone() -> None:
    """A session end waiting for the worker leaves the count (the worker does not yield to it) but still
    counts when another request asks whether it is alone: that one answers at once, not waits too."""
    counter = InflightCounter()
    counter.enter()  # the waiting end
    assert counter.alone()
    with counter.set_aside():
        assert (counter.count, counter.aside, counter.busy(), counter.alone()) == (0, 1, False, True)
        counter.enter()  # another end arrives
        assert (counter.count, counter.alone()) == (1, False)
        counter.leave()
        assert counter.alone()
    assert (counter.count, counter.aside, counter.alone()) == (1, 0, True)


def test_a_request_in_flight_delays_the_job_until_the_cap(queue: IngestQueue) -> None:
    counter = InflightCounter()
    counter.enter()  # a request held open for the whole test
    worker, seen = run_worker(queue, counter.busy, 1.5)
    try:
        queued = time.monotonic()
        queue.enqueue(job_bytes("held"))
        assert not seen.done.wait(1.0)  # not before the cap
        assert queue.stats()["depth"] == 1
        assert seen.done.wait(10.0)  # then it runs, the request still in flight
        assert seen.times[0] - queued >= 1.5
        assert counter.busy()
    finally:
        worker.stop()


def test_the_job_runs_as_soon_as_the_requests_are_done(queue: IngestQueue) -> None:
    counter = InflightCounter()
    counter.enter()
    worker, seen = run_worker(queue, counter.busy, 30.0)
    try:
        queue.enqueue(job_bytes("released"))
        assert not seen.done.wait(0.5)
        released = time.monotonic()
        counter.leave()
        assert seen.done.wait(5.0)
        assert seen.times[0] - released < 2.0  # the poll, not the 30 s cap
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("busy", "cap"),
    [(None, 30.0), (lambda: False, 30.0), (lambda: True, 0.0)],
    ids=["no-counter", "no-request-in-flight", "cap-0-with-a-request-in-flight"],
)
def test_the_job_runs_at_once(queue: IngestQueue, busy: Callable[[], bool] | None, cap: float) -> None:
    worker, seen = run_worker(queue, busy, cap)
    try:
        queued = time.monotonic()
        queue.enqueue(job_bytes("now"))
        assert seen.done.wait(5.0)
        assert seen.times[0] - queued < 2.0
    finally:
        worker.stop()


def test_jobs_queued_while_it_waits_join_the_batch(queue: IngestQueue) -> None:
    counter = InflightCounter()
    counter.enter()
    batches: list[list[str]] = []

    def handle_many(jobs: list[SessionJob]) -> None:
        batches.append([job.session_id for job in jobs])

    worker = IngestWorker(queue, Recorder(), handle_many=handle_many, block_s=0.1).yield_to(counter.busy, 1.0)
    worker.start()
    try:
        queue.enqueue(job_bytes("first"))
        time.sleep(0.4)  # the worker has read the first and waits
        queue.enqueue(job_bytes("second"))
        deadline = time.monotonic() + 10
        while not batches and time.monotonic() < deadline:
            time.sleep(0.05)
        assert batches[:1] == [["first", "second"]]
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (b"", False),
        (b"wait=0", False),
        (b"wait=", False),
        (b"wait=0.00", False),
        (b"wait=0e0", False),
        (b"wait=abc", False),
        (b"wait=5", True),
        (b"x=1&wait=0.5", True),
    ],
)
def test_a_session_end_that_waits_for_the_worker_is_not_counted(query: bytes, expected: bool) -> None:
    assert waits_for_worker(query) is expected


def test_the_app_counts_its_requests_in_flight(settings: Settings) -> None:
    app = create_app(settings)

    @app.get("/probe")
    def probe(request: Request) -> int:
        return int(request.app.state.inflight.count)

    with TestClient(app) as client:
        assert client.get("/probe").json() == 1  # this request itself
        assert client.get("/probe", params={"wait": 5}).json() == 0  # waits for the worker: not counted
        assert app.state.inflight.count == 0


def test_serve_delays_ingestion_while_a_request_is_held(settings: Settings) -> None:
    """``agtos serve``'s layout (queue mode, worker thread): an open request holds a session end's
    ingestion back for the cap, then the episode is stored while the request is still open."""
    cap = 3.0
    app = create_app(settings.with_overrides(ingest_mode="queue", ingest_worker=True, worker_yield_max_s=cap))
    release = threading.Event()

    @app.get("/hold")
    def hold() -> str:
        release.wait(60)
        return "released"

    def depth(client: TestClient) -> int:
        return int(queue_health(client)["depth"])

    with TestClient(app) as client:
        held = threading.Thread(target=client.get, args=("/hold",))
        held.start()
        try:
            while app.state.inflight.count < 1:
                time.sleep(0.01)
            queued = time.monotonic()
            ended = end(client, "kay", "k")
            assert ended["status"] == "queued"
            time.sleep(cap / 2)
            assert depth(client) == 1  # still queued: the worker yields to /hold
            deadline = time.monotonic() + 120
            while depth(client) and time.monotonic() < deadline:
                time.sleep(0.1)
            stored = time.monotonic() - queued
            assert depth(client) == 0 and held.is_alive()  # done while /hold is still open
            assert stored >= cap
        finally:
            release.set()
            held.join(10)
        assert search_ids(client, "kay")[:1] == [ended["episodeId"]]
