"""Issue 14/15: records stored while the embedder was down get their vectors later.

A session ended while the embedder fails is stored for keyword search only; it is noted in the
user's pending set, and once the embedder answers again the ingest worker (after its next job) or
the maintenance sweep embeds it, so vector search finds it by meaning. Through the HTTP API with
the bundled ONNX model as the embedder that is back and a failing one swapped in on the coordinator
as the one that is down (or the silent Ollama stub of test_embedder_breaker for the breaker and
``/health``); real Redis, keys read back with SCAN.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import EmbeddingConfig, MaintenanceConfig, Settings
from agtos.memory import vector_repair
from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embeddings import Embedder, EmbeddingError
from agtos.serving.app import create_app
from agtos.storage.keys import GlobalKeys
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector
from tests.helpers import run_maintenance, talk, user
from tests.test_embedder_breaker import ALICE, COOLDOWN_S, QUERY_TIMEOUT_S, HangableEmbedServer, open_the_breaker

ANA = "ana"
LISBON = ("user", "My sister Ana moved to Lisbon last spring and she adores her new flat there.")
GARDEN = ("user", "I planted tomatoes and basil in the garden behind the house.")
PARAPHRASE = "sibling relocating abroad, Portugal"  # no word of the Lisbon session


class SwitchableEmbedder:
    """The real embedder, or while ``down`` an embedder whose every call fails (a crashed service)."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.name, self.model = real.name, real.model
        self.down = False
        self.sizes: list[int] = []  # texts of each call made while up

    @property
    def dim(self) -> int:
        return self.real.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.down:
            raise EmbeddingError("test embedder is down")
        self.sizes.append(len(texts))
        return self.real.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        if self.down:
            raise EmbeddingError("test embedder is down")
        return self.real.embed_one(text)


def sweep_settings(settings: Settings, **changes: Any) -> Settings:
    """A maintenance run is carried out at once (no ResourceGuard waits)."""
    return settings.with_overrides(
        background_work_policy="always", maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0), **changes
    )


def swap_embedder(coordinator: MemoryCoordinator) -> SwitchableEmbedder:
    semantic = coordinator.services.semantic
    switch = SwitchableEmbedder(semantic.embedder)  # the ONNX model, loaded now: the indexes get its dimension
    semantic._embedder = switch
    return switch


@pytest.fixture
def onnx_api(settings: Settings) -> Iterator[tuple[TestClient, SwitchableEmbedder, MemoryCoordinator]]:
    coordinator = MemoryCoordinator(sweep_settings(settings))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, swap_embedder(coordinator), coordinator
    finally:
        coordinator.close()


def search_sessions(client: TestClient, q: str, mode: str) -> list[str]:
    response = client.get("/api/memory/search", params={"q": q, "mode": mode, "limit": 5}, headers=user(ANA))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] is None, body  # the mode asked for was used
    return [hit["sessionId"] for hit in body["results"]]


def pending(client: TestClient) -> int:
    return client.get("/health").json()["tiers"]["semantic"]["pendingVectors"]


def pending_keys(raw: redis.Redis, prefix: str) -> list[bytes]:
    return list(raw.scan_iter(match=f"{prefix}:u:*pending*", count=1000))


def store_lisbon_while_down(client: TestClient, switch: SwitchableEmbedder) -> None:
    """The garden session while the embedder is up, the Lisbon one while it is down."""
    talk(client, ANA, "garden", GARDEN, ("assistant", "Tomatoes and basil grow well together."))
    assert pending(client) == 0
    switch.down = True
    ended = talk(client, ANA, "lisbon", LISBON, ("assistant", "How lovely for her."))
    assert ended["saved"] is True and ended["status"] == "done"


def test_a_session_stored_while_down_is_found_by_meaning_after_the_sweep(
    onnx_api: tuple[TestClient, SwitchableEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, switch, _ = onnx_api
    store_lisbon_while_down(client, switch)
    waiting = pending(client)
    assert waiting >= 1  # its episode (and any memory distilled from it)
    assert search_sessions(client, "Lisbon", "bm25") == ["lisbon"]  # found by keyword at once
    switch.down = False
    assert "lisbon" not in search_sessions(client, PARAPHRASE, "vector")  # no vector yet: a hole in recall
    run = run_maintenance(client, ANA)
    assert run["status"] == "completed", run
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": waiting, "gone": 0, "error": None}
    assert search_sessions(client, PARAPHRASE, "vector")[:1] == ["lisbon"]
    assert pending(client) == 0
    # as ingestion writes them: the episode's float32 row (384 x 4 bytes), its turns' float16 rows (384 x 2)
    episode_id, base = _episode_of(client, "lisbon"), f"{key_prefix}:u:{{{ANA}}}"
    assert len(raw_redis.hget(f"{base}:episode:_idx:vec:data", episode_id) or b"") == 1536
    turn_rows = raw_redis.hgetall(f"{base}:turn:_idx:vec:data")
    assert {len(turn_rows.get(f"{episode_id}.t{n}".encode(), b"")) for n in (0, 1)} == {768}
    assert pending_keys(raw_redis, key_prefix) == []  # the emptied set is gone, the user off the global list
    assert raw_redis.smembers(f"{key_prefix}:meta:pending_vectors") == set()


def queue_end(client: TestClient, session_id: str, *turns: tuple[str, str]) -> None:
    """Append the turns and end the session without waiting for the worker (queued)."""
    body = {"turns": [{"role": role, "content": content} for role, content in turns]}
    appended = client.post(f"/api/memory/sessions/{session_id}/turns", json=body, headers=user(ANA))
    assert appended.status_code == 200, appended.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", params={"wait": 0}, headers=user(ANA))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text


def test_the_worker_fills_them_after_its_next_job(settings: Settings) -> None:
    coordinator = MemoryCoordinator(sweep_settings(settings, ingest_mode="queue", ingest_worker=False))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            switch = swap_embedder(coordinator)
            worker = coordinator.ingest_worker()
            queue_end(client, "garden", GARDEN, ("assistant", "Tomatoes and basil grow well together."))
            switch.down = True
            queue_end(client, "lisbon", LISBON, ("assistant", "How lovely for her."))
            assert worker.drain() == 2  # one batch: embedding failed, both stored for keyword search only
            assert pending(client) >= 2
            switch.down = False
            assert search_sessions(client, PARAPHRASE, "vector") == []
            assert search_sessions(client, "Lisbon", "bm25") == ["lisbon"]
            queue_end(client, "bikes", ("user", "My bicycle has a flat tyre, I need a new inner tube."))
            queue_end(client, "kitchen", ("user", "I repainted the kitchen walls a pale yellow colour."))
            assert worker.drain() == 2  # the next jobs (one batch) embed their own texts, then the pending records
            assert pending(client) == 0
            assert search_sessions(client, PARAPHRASE, "vector")[:1] == ["lisbon"]
            assert "garden" in search_sessions(client, "vegetables growing outdoors at home", "vector")
    finally:
        coordinator.close()


def test_forget_all_leaves_no_pending_entry(
    onnx_api: tuple[TestClient, SwitchableEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, switch, _ = onnx_api
    store_lisbon_while_down(client, switch)
    talk(client, "bea", "other", ("user", "My brother Tom works as a nurse in Porto."), ("assistant", "Noted."))
    assert len(pending_keys(raw_redis, key_prefix)) == 2
    forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user(ANA))
    assert forgot.status_code == 200, forgot.text
    left = [key.decode() for key in pending_keys(raw_redis, key_prefix)]
    assert left == [f"{key_prefix}:u:{{bea}}:vectors:_pending"]  # the other user's stays
    assert raw_redis.smembers(f"{key_prefix}:meta:pending_vectors") == {b"bea"}
    assert pending(client) >= 1


def test_a_failing_embedder_keeps_records_pending_and_forgotten_ones_are_not_filled(
    onnx_api: tuple[TestClient, SwitchableEmbedder, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    client, switch, _ = onnx_api
    store_lisbon_while_down(client, switch)
    waiting = pending(client)
    still_down = run_maintenance(client, ANA)["report"]["summary"]["vectorsFilled"]
    assert still_down == {"filled": 0, "gone": 0, "error": "embedder unavailable"}
    assert pending(client) == waiting
    episode_id = _episode_of(client, "lisbon")
    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers=user(ANA))
    assert gone.status_code == 200, gone.text
    assert pending(client) == 0  # its notes went with it (tests/test_forget_pending_vectors.py)
    switch.down = False
    filled = run_maintenance(client, ANA)["report"]["summary"]["vectorsFilled"]
    # its memories were learnt from it alone and went with it (test_forget_episode): nothing left to fill
    assert filled == {"filled": 0, "gone": 0, "error": None}
    assert pending(client) == 0
    vectors = f"{key_prefix}:u:{{{ANA}}}:episode:_idx:vec:data"
    assert not raw_redis.hexists(vectors, episode_id)  # no vector written for the forgotten episode
    assert raw_redis.hlen(vectors) == 1  # the garden's


def test_a_sweep_embeds_long_sessions_a_few_texts_per_call(
    onnx_api: tuple[TestClient, SwitchableEmbedder, MemoryCoordinator],
    monkeypatch: pytest.MonkeyPatch,
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Each episode brings a text per turn: a call takes fewer records rather than more texts than the bound."""
    client, switch, _ = onnx_api
    store_lisbon_while_down(client, switch)
    talk(client, ANA, "bikes", ("user", "My bicycle has a flat tyre."), ("assistant", "Get a new inner tube."))
    monkeypatch.setattr(vector_repair, "FILL_TEXTS", 3)
    switch.down = False
    switch.sizes.clear()
    assert run_maintenance(client, ANA)["report"]["summary"]["vectorsFilled"]["error"] is None
    assert switch.sizes and max(switch.sizes) <= 3, switch.sizes
    assert pending(client) == 0
    base = f"{key_prefix}:u:{{{ANA}}}"  # every record has its vectors: 3 episodes of 2 turns each
    assert (raw_redis.hlen(f"{base}:episode:_idx:vec:data"), raw_redis.hlen(f"{base}:turn:_idx:vec:data")) == (3, 6)
    assert search_sessions(client, PARAPHRASE, "vector")[:1] == ["lisbon"]


def _episode_of(client: TestClient, session_id: str) -> str:
    found = client.get("/api/memory/search", params={"q": "Lisbon", "mode": "bm25"}, headers=user(ANA)).json()
    return next(hit["id"] for hit in found["results"] if hit["sessionId"] == session_id)


def test_health_says_degraded_at_once_while_the_breaker_is_open(settings: Settings) -> None:
    """Its probe's last answer (ok, cached 15 s) must not hide a breaker that opened since; after the
    cool-down /health's probe is the trial call, and the next session end fills the pending records."""
    server = HangableEmbedServer()
    embedding = EmbeddingConfig(
        provider="ollama",
        model="in-house",
        base_url=server.url,
        query_timeout_s=QUERY_TIMEOUT_S,
        breaker_cooldown_s=COOLDOWN_S,
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            talk(client, ALICE, "garden", GARDEN, ("assistant", "Tomatoes and basil grow well together."))
            first = client.get("/health").json()
            assert first["status"] == "ok" and first["tiers"]["semantic"]["pendingVectors"] == 0
            open_the_breaker(client, server)
            talk(client, ALICE, "bikes", ("user", "My bicycle has a flat tyre, I need a new inner tube."))
            started = time.monotonic()
            health = client.get("/health").json()
            assert time.monotonic() - started < QUERY_TIMEOUT_S  # not probed: the breaker answers
            semantic = health["tiers"]["semantic"]
            assert health["status"] == "degraded" and "semantic" in health["degraded"]
            assert semantic["error"].endswith("(circuit breaker open)")
            assert semantic["pendingVectors"] >= 1
            server.answer()
            time.sleep(COOLDOWN_S)
            asked = server.requests
            back = client.get("/health").json()  # half-open: a fresh probe, the trial call, closes it
            assert server.requests == asked + 1
            assert back["status"] == "ok" and back["tiers"]["semantic"]["pendingVectors"] >= 1
            talk(client, ALICE, "kitchen", ("user", "I repainted the kitchen walls a pale yellow colour."))
            assert client.get("/health").json()["tiers"]["semantic"]["pendingVectors"] == 0
            response = client.get(
                "/api/memory/search", params={"q": "bicycle tyre", "mode": "vector"}, headers=user(ALICE)
            )
            assert [hit["sessionId"] for hit in response.json()["results"]][:1] == ["bikes"]
    finally:
        coordinator.close()
        server.close()


def test_the_pending_set_is_bounded_per_user(settings: Settings) -> None:
    pending_set = PendingVectors(
        RedisConnector(settings.redis_url, settings.data_dir), GlobalKeys(settings.key_prefix), limit=3
    )
    assert pending_set.add(ANA, [("episode", "ep-1"), ("memory", "m-1")], at_ms=1_000) == 0
    assert pending_set.add(ANA, [("episode", "ep-2"), ("memory", "m-2"), ("memory", "m-1")], at_ms=2_000) == 1
    assert [r.member for r in pending_set.oldest(ANA, 10)] == ["episode:ep-2", "memory:m-1", "memory:m-2"]
    noted = pending_set.oldest(ANA, 1)
    pending_set.add(ANA, [("episode", "ep-2")], at_ms=4_000)  # noted again while a fill embedded it
    assert pending_set.clear(ANA, noted) == 3  # so it stays
    assert pending_set.clear(ANA, pending_set.oldest(ANA, 10)) == 0
    with pytest.raises(ValueError, match="pending namespace must be one of"):
        pending_set.add(ANA, [("rel", "r-1")], at_ms=3_000)
