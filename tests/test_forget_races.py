"""Forget-all against work that took the user's data before it (README "Privacy").

A session end is acknowledged (queued) and ingested later; a worker, the vector repair or a
maintenance run reads a user's records and writes a moment later. A forget-all in between must
not let any of it come back: the queued and dead-lettered jobs holding the turns are deleted, a job
already taken stores nothing, and what background work wrote meanwhile is deleted again. Through
the HTTP API and the queue's worker, real Redis (keys read back with SCAN, the streams with XRANGE)
and the bundled ONNX embedder; the forget is sent from inside the worker's embedding call, so it
lands exactly between the read and the write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory import dreamer, dreamer_pipeline
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.lint_pipeline import INLINE_STEPS, LintState, maintain_run
from agtos.memory.services import Services
from agtos.memory.vector_repair import fill_user
from agtos.providers.embeddings import Embedder
from agtos.schemas import Conclusion, Episode
from agtos.schemas.api.admin_models import MaintenanceRun
from agtos.serving.app import create_app
from tests.helpers import user, user_key_names
from tests.needles import holds, occurrences
from tests.test_pending_vectors import SwitchableEmbedder

PIN = [
    {"role": "user", "content": "My bank PIN is 4417 and I moved to 12 Elm Street in Leeds."},
    {"role": "assistant", "content": "Noted, 12 Elm Street in Leeds."},
]
ALLERGY = [
    {"role": "user", "content": "I am allergic to peanuts and I work at St Mary's Hospital as a nurse."},
    {"role": "assistant", "content": "Noted: no peanuts."},
]
GARDEN = [
    {"role": "user", "content": "I planted tomatoes and basil in the garden behind my house in York."},
    {"role": "assistant", "content": "Tomatoes and basil, lovely."},
]


class HookedEmbedder(SwitchableEmbedder):
    """The real embedder (failing while ``down``); ``hook`` (if set) runs once at the start of the
    next batch call: the moment a job has read its data and not written yet."""

    def __init__(self, real: Embedder) -> None:
        super().__init__(real)
        self.hook: Callable[[], None] | None = None

    def embed(self, texts: list[str]) -> np.ndarray:
        hook, self.hook = (None, self.hook) if self.down else (self.hook, None)
        if hook is not None:
            hook()
        return super().embed(texts)


@pytest.fixture
def api(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator, HookedEmbedder]]:
    """Queue mode, no worker thread (the test drives it), failed jobs dead-lettered at the first
    failure, background work never deferred."""
    coordinator = MemoryCoordinator(
        settings.with_overrides(
            ingest_mode="queue",
            ingest_worker=False,
            ingest_retry_delay_s=0.0,
            ingest_max_attempts=1,
            background_work_policy="always",
            maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0),
        )
    )
    semantic = coordinator.services.semantic
    hooked = HookedEmbedder(semantic.embedder)
    semantic._embedder = hooked
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client, coordinator, hooked
    coordinator.close()


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def queue_end(client: TestClient, who: str, session: str, turns: list[dict[str, str]]) -> str:
    """Post the turns, end the session without waiting; returns its episode id (status queued)."""
    assert client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who)).is_success
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200, ended.text
    assert ended.json()["status"] == "queued"
    return str(ended.json()["episodeId"])


def forget_all(client: TestClient, who: str) -> None:
    response = client.post("/api/memory/forget", json={"kind": "all"}, headers=user(who))
    assert response.status_code == 200, response.text


def search_hits(client: TestClient, who: str, query: str) -> list[str]:
    response = client.get("/api/memory/search", params={"q": query}, headers=user(who))
    assert response.status_code == 200, response.text
    return [hit["id"] for hit in response.json()["results"]]


def streams_text(raw: redis.Redis, prefix: str) -> bytes:
    """Every payload of the ingest queue and its dead letters (what a forgotten user's turns could sit in)."""
    entries: list[Any] = [e for s in ("ingest-queue", "ingest-dead") for e in raw.xrange(f"{prefix}:meta:{s}") or []]
    return b"".join(value for _id, fields in entries for value in fields.values())


def test_a_session_end_queued_before_a_forget_all_is_never_stored(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    client, coordinator, _ = api
    queue_end(client, "alice", "s1", PIN)
    kept = queue_end(client, "alice2", "s1", PIN)  # a user whose id extends hers: not forgotten
    assert occurrences(streams_text(raw, key_prefix), "4417") == 2
    forget_all(client, "alice")
    assert occurrences(streams_text(raw, key_prefix), "4417") == 1  # her job left the queue at once
    [mark] = raw.zrange(f"{key_prefix}:meta:forget_fences", 0, -1)  # a digest of her id, not the id
    assert hashlib.sha256(b"alice").hexdigest().startswith(mark.decode()) and len(mark) >= 32
    assert coordinator.ingest_worker().drain() == 1  # only alice2's job is left
    assert user_key_names(raw, key_prefix, "alice") == set()
    assert search_hits(client, "alice", "bank PIN Elm Street") == []
    assert search_hits(client, "alice2", "bank PIN Elm Street") == [kept]
    assert b'alice"' not in streams_text(raw, key_prefix)


def test_a_forget_all_deletes_the_users_dead_letters_and_keeps_others(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    client, coordinator, _ = api
    gate = coordinator.services.query_ingest

    def broken(user_id: str, session_id: str) -> None:
        raise RuntimeError("worker crashed")

    gate.mark_interaction_saved = broken  # type: ignore[method-assign]
    queue_end(client, "alice", "s1", PIN)
    worker = coordinator.ingest_worker()
    assert worker.drain() == 1
    queue_end(client, "bob", "s1", GARDEN)
    assert worker.drain() == 1
    assert raw.xlen(f"{key_prefix}:meta:ingest-dead") == 2  # both failed once: dead letters
    forget_all(client, "alice")
    left = streams_text(raw, key_prefix)
    assert not holds(left, "4417") and b"Elm Street" not in left
    assert b"tomatoes and basil" in left
    assert raw.xlen(f"{key_prefix}:meta:ingest-dead") == 1


def test_a_job_taken_by_a_worker_before_the_forget_stores_nothing(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """The worker has read the entry (it is no longer in the queue for the forget to delete) and
    waits for the requests in flight; the forget comes then: the job is skipped whole."""
    client, coordinator, _ = api
    queue_end(client, "alice", "s1", PIN)
    calls: list[str] = []

    def busy() -> bool:  # the worker's look at the requests in flight, after it took its entries
        calls.append("busy")
        forget_all(client, "alice")
        return False

    worker = coordinator.ingest_worker().yield_to(busy, 1.0)
    assert worker.run_once(block=False) == 1
    assert calls == ["busy"]
    assert user_key_names(raw, key_prefix, "alice") == set()
    assert search_hits(client, "alice", "bank PIN Elm Street") == []


def test_a_forget_all_while_a_worker_holds_the_job_leaves_nothing(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """The worker has read the job and is embedding it when the forget arrives: what it writes
    afterwards (episode, turns, indexes, entities) is deleted again, and no Dreamer runs on it."""
    client, coordinator, hooked = api
    episode = queue_end(client, "alice", "s1", PIN)
    ended: list[object] = []
    coordinator.services.events.subscribe("sessionEnded", ended.append)
    hooked.hook = lambda: forget_all(client, "alice")
    assert coordinator.ingest_worker().drain() == 1
    assert hooked.hook is None  # the forget ran inside the job
    assert user_key_names(raw, key_prefix, "alice") == set()
    assert search_hits(client, "alice", "bank PIN Elm Street") == []
    assert client.get(f"/api/memory/episodes/{episode}", headers=user("alice")).status_code == 404
    assert ended == []
    assert client.get("/health").json()["checks"]["ingest-queue"]["depth"] == 0


def forget_after_consolidation(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every Dreamer run forget the user (over HTTP) right after drawing its conclusions; the
    returned list gets the count of conclusions each run stored after that forget."""
    stored: list[int] = []

    def consolidate_then_forget(
        rt: Services, user_id: str, episodes: list[Episode]
    ) -> tuple[list[Conclusion], str, str | None]:
        found = dreamer_pipeline.consolidate(rt, user_id, episodes)
        forget_all(client, user_id)
        return found

    def store_counted(rt: Services, user_id: str, found: list[Conclusion]) -> list[Conclusion]:
        kept = dreamer_pipeline.store_conclusions(rt, user_id, found)
        stored.append(len(kept))
        return kept

    steps = replace(dreamer_pipeline.INLINE_STEPS, consolidate=consolidate_then_forget, store=store_counted)
    real = dreamer_pipeline.run_dreamer
    monkeypatch.setattr(dreamer, "run_dreamer", lambda rt, user_id: real(rt, user_id, steps))
    return stored


def test_a_forget_during_the_dreamer_leaves_no_conclusion_or_marker(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder],
    raw: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Dreamer (rules, run on the session's end) has drawn its conclusions when the user forgets
    everything: it stores none of them (the episodes they rest on are gone: dreamer_pipeline), and the
    profile it writes next and its once-per-episode marker go too."""
    client, coordinator, _ = api
    stored = forget_after_consolidation(client, monkeypatch)
    queue_end(client, "alice", "s1", ALLERGY)
    assert coordinator.ingest_worker().drain() == 1
    assert stored == [0]  # the Dreamer ran its store step after the forget
    assert user_key_names(raw, key_prefix, "alice") == set()


def test_a_session_ended_after_the_forget_is_stored(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    client, coordinator, _ = api
    queue_end(client, "alice", "s1", PIN)
    forget_all(client, "alice")
    garden = queue_end(client, "alice", "s2", GARDEN)
    assert coordinator.ingest_worker().drain() == 1
    assert search_hits(client, "alice", "tomatoes basil garden") == [garden]
    assert search_hits(client, "alice", "bank PIN Elm Street") in ([], [garden])
    assert not any(holds(key, "4417") for key in user_key_names(raw, key_prefix, "alice"))


def test_a_forget_during_the_vector_repair_leaves_nothing(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """Records stored while the embedder was down; the repair reads them, the user forgets
    everything while it embeds: the vectors it writes are deleted again."""
    client, coordinator, hooked = api
    hooked.down = True
    queue_end(client, "alice", "s1", PIN)
    assert coordinator.ingest_worker().drain() == 1  # stored for keyword search, noted pending
    assert search_hits(client, "alice", "bank PIN") != []
    hooked.down = False
    hooked.hook = lambda: forget_all(client, "alice")
    fill_user(coordinator.services, "alice")
    assert hooked.hook is None
    assert user_key_names(raw, key_prefix, "alice") == set()


def test_an_episode_forgotten_during_the_vector_repair_keeps_no_vector(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """One record forgotten while its vector is computed: no vector of it (nor of its turns) stays;
    the other pending record gets its vectors."""
    client, coordinator, hooked = api
    hooked.down = True
    pin = queue_end(client, "alice", "s1", PIN)
    garden = queue_end(client, "alice", "s2", GARDEN)
    assert coordinator.ingest_worker().drain() == 2
    hooked.down = False

    def forget_pin() -> None:
        response = client.post("/api/memory/forget", json={"kind": "episode", "id": pin}, headers=user("alice"))
        assert response.status_code == 200, response.text

    hooked.hook = forget_pin
    report = fill_user(coordinator.services, "alice")
    # skipped: the forgotten episode and the memories learnt from it alone (forgotten with it); the rest filled
    assert report.skipped >= 1 and report.filled >= 1
    semantic = coordinator.services.semantic
    episode_vectors = set(semantic.store("episode").vectors.ids("alice"))
    turn_vectors = set(semantic.turns.vectors.ids("alice"))
    assert episode_vectors == {garden}
    assert turn_vectors and all(doc.startswith(garden) for doc in turn_vectors)
    assert not any(pin in key for key in user_key_names(raw, key_prefix, "alice"))


def test_a_forget_during_a_maintenance_run_leaves_no_run_record(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """The sweep has loaded the user's memories when they forget everything: neither what it
    writes next (its report in the history) nor the run's own status record stays."""
    client, coordinator, _ = api
    queue_end(client, "alice", "s1", PIN)
    queue_end(client, "alice", "s2", GARDEN)
    assert coordinator.ingest_worker().drain() == 2
    rt = coordinator.services

    def load_then_forget(rt_: Services, user_id: str) -> LintState:
        state = INLINE_STEPS.load(rt_, user_id)
        forget_all(client, user_id)
        return state

    steps = replace(INLINE_STEPS, load=load_then_forget)
    run = maintain_run(rt, MaintenanceRun(run_id="run-0123456789ab", user_id="alice"), steps)
    assert run.status == "completed"
    assert user_key_names(raw, key_prefix, "alice") == set()
    assert client.get("/api/memory/maintain/runs/run-0123456789ab", headers=user("alice")).status_code == 404


def test_a_forget_all_passes_over_unreadable_queue_entries(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """Entries whose job is not a session end's JSON object (what a worker dead-letters as unreadable)
    are left alone; the user's own goes."""
    client, _, _ = api
    queue_end(client, "alice", "s1", PIN)
    stream = f"{key_prefix}:meta:ingest-queue"
    for junk in (b"not json", b"[1, 2]", b'"alice"', b'{"user": "alice"}'):
        raw.xadd(stream, {"job": junk})
    forget_all(client, "alice")
    left = [fields[b"job"] for _id, fields in raw.xrange(stream)]
    assert left == [b"not json", b"[1, 2]", b'"alice"', b'{"user": "alice"}']


def test_an_opt_out_made_in_another_process_a_moment_ago_stops_the_worker(
    api: tuple[TestClient, MemoryCoordinator, HookedEmbedder], raw: redis.Redis, key_prefix: str
) -> None:
    """The worker runs in its own process (``agtos serve`` starts one), whose opt-out cache read the
    user as not opted out a moment ago; the user opts out through the API: their queued session end
    is not stored (the worker reads the opt-out list afresh, not its cached answer)."""
    client, coordinator, _ = api
    worker_process = MemoryCoordinator(coordinator.services.settings)
    try:
        queue_end(client, "alice", "s1", PIN)
        assert worker_process.privacy.is_opted_out("alice") is False  # cached there for a moment
        opted = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("alice"))
        assert opted.status_code == 200, opted.text
        assert worker_process.ingest_worker().drain() == 1
        assert not [k for k in user_key_names(raw, key_prefix, "alice") if ":episode:" in k or ":turn" in k]
        assert search_hits(client, "alice", "bank PIN Elm Street") == []
    finally:
        worker_process.close()
