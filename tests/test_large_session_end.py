"""A large session's end does not hold the smaller ends the worker reads with it (issue 15).

Ending a session costs about its text's embedding (~4 KB/s on 2 cores, docs/measurements.md), so a
session near the journal's byte cap takes the worker many minutes. The worker reads up to 32 queued
ends at once; they used to go through one ingestion run, so every end read with a large one waited for
its embedding. Now a batch's ends run in runs of at most ``RUN_MAX_CHARS`` characters of turn text, a
larger end alone after the others (and a user's later ends after it, in their order). Driven over HTTP
in queue mode with a recording stand-in embedder; the cap is lowered so the large end is small.
A worker holds the entries it works on, so a job longer than ``AGTOS_INGEST_CLAIM_IDLE_S`` is not
taken over (and run again) by another worker as a dead consumer's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory import ingest_worker
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import IngestWorker, SessionJob, job_runs
from agtos.schemas import Role, Turn
from agtos.serving.app import create_app
from agtos.storage.ingest_queue import IngestQueue
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from tests.helpers import user

DIM = 384
CAP = 4_000  # RUN_MAX_CHARS in these tests


class RecordingEmbedder:
    """Deterministic unit vectors from a text's digest; records every call's texts."""

    name = "recording"
    model = "recording"
    dim = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest() * 48, dtype=np.uint8)[:DIM] for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM) - 127.5
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


@pytest.fixture
def embedder() -> RecordingEmbedder:
    return RecordingEmbedder()


@pytest.fixture
def client(settings: Settings, embedder: RecordingEmbedder) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    coord = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False), embedder=embedder)
    with TestClient(create_app(coordinator=coord)) as test_client:
        yield test_client, coord
    coord.close()


def job(user_id: str, chars: int) -> SessionJob:
    return SessionJob(user_id=user_id, session_id="s", segment="x", turns=[Turn(role=Role.user, content="a" * chars)])


def test_job_runs_defer_a_large_end_and_keep_each_users_order() -> None:
    jobs = [job("ann", 300), job("bob", 10), job("ann", 10), job("cid", 20), job("dee", 60), job("eve", 50)]
    # ann's large end (300 > 100) and ann's later one after the others; bob+cid+dee fit 100, eve starts a run
    assert job_runs(jobs, 100) == [[1, 3, 4], [5], [0], [2]]
    assert job_runs(jobs, 1_000) == [[0, 1, 2, 3, 4, 5]]
    assert job_runs([job("ann", 101), job("bob", 101)], 100) == [[0], [1]]  # each past the cap: alone
    assert job_runs([], 100) == []


def end(client: TestClient, who: str, session: str, turns: list[dict[str, str]]) -> None:
    appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert appended.status_code == 200, appended.text
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200, ended.text
    assert ended.json()["status"] == "queued"


def small(marker: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"I prefer tactile keyboards, remember that: {marker} for coding at home."},
        {"role": "assistant", "content": "Noted: tactile keyboards."},
    ]


def search(client: TestClient, who: str, query: str) -> list[dict[str, Any]]:
    found = client.get("/api/memory/search", params={"q": query, "mode": "bm25"}, headers=user(who))
    assert found.status_code == 200, found.text
    return list(found.json()["results"])


def test_a_large_end_runs_after_the_small_ends_read_with_it(
    client: tuple[TestClient, MemoryCoordinator], embedder: RecordingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    http, coord = client
    monkeypatch.setattr(ingest_worker, "RUN_MAX_CHARS", CAP)
    filler = " ".join(f"On day {n} I walked along the river with my dog and we talked about books." for n in range(80))
    big = f"I prefer long walks, remember that: bigann. {filler} The last word is quokkafinale."
    assert len(big) > CAP
    end(http, "ann", "big", [{"role": "user", "content": big}])
    end(http, "bob", "one", small("smallbob"))
    end(http, "ann", "two", small("smallann"))
    embedder.calls.clear()
    assert coord.ingest_worker().drain() == 3

    def first(marker: str) -> int:
        return next(at for at, call in enumerate(embedder.calls) if any(marker in t for t in call))

    for call in embedder.calls:  # the large end's texts are embedded in calls of their own
        said = {m for m in ("bigann", "smallbob", "smallann") if any(m in t for t in call)}
        assert "bigann" not in said or said == {"bigann"}, said
    assert first("smallbob") < first("bigann") < first("smallann")  # bob first; ann's ends in her order
    # every word of the large turn is in an embedded text (its last window too), and each window once
    windows = [t for call in embedder.calls for t in call if "river with my dog" in t]
    assert any("quokkafinale" in t for t in windows)
    assert len(windows) == len(set(windows)) > 1
    for who, word in (("ann", "quokkafinale"), ("bob", "smallbob"), ("ann", "smallann")):
        assert search(http, who, word), (who, word)


def test_a_long_job_is_not_taken_over_by_another_worker(settings: Settings) -> None:
    """Two workers on one queue; the first's job outlasts the claim idle time (1 s) three times while
    the other looks for stale entries every 50 ms: the job runs once, is done, nothing dead-lettered."""
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    queue = IngestQueue(connector, GlobalKeys(settings.key_prefix))
    entry_id, _ = queue.enqueue(job("ann", 10).model_dump_json().encode())
    ran: list[str] = []
    other = IngestWorker(queue, lambda _: ran.append("other"), claim_idle_s=1.0, consumer="other")

    def long_job(_: SessionJob) -> None:
        ran.append("first")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            other.run_once(block=False)
            time.sleep(0.05)

    first = IngestWorker(queue, long_job, claim_idle_s=1.0, consumer="first")
    try:
        assert first.run_once(block=False) == 1
        assert ran == ["first"]
        assert not queue.contains(entry_id)
        assert queue.dead_letters() == []
    finally:
        connector.close()
