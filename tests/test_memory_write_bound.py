"""A memory written over HTTP waits on a silent remote embedder at most the request bound (issue 15).

``POST``/``PUT /api/memory/memories`` embed the memory's text, then its new entity names; with an
embedder that accepts and never answers each waited the batch timeout (30 s by default: 60.5 s for
one memory, measured). They now wait ``AGTOS_EMBEDDING_REQUEST_TIMEOUT_S`` each at most (the second
silence opens the circuit breaker), store the memory for keyword search and note it for its vector.
Through HTTP with the hung Ollama-style stub of test_embedder_breaker.
"""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from tests.helpers import user
from tests.test_embedder_breaker import HangableEmbedServer
from tests.test_probe_recent import (
    COOLDOWN_S,
    LONG_BATCH_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    SLACK_S,
    bounded_api,
    embed_server,
)

__all__ = ["bounded_api", "embed_server"]  # the fixtures, used here by name

LISBON = "My sister Ana moved to Lisbon with her friend Marta Oliveira last spring."


def test_a_memory_written_while_the_embedder_is_silent_waits_the_request_bound(
    bounded_api: TestClient, embed_server: HangableEmbedServer
) -> None:
    assert 2 * REQUEST_TIMEOUT_S + SLACK_S < LONG_BATCH_TIMEOUT_S  # the bound is what the test can tell apart
    warm = bounded_api.post("/api/memory/memories", json={"text": "I keep bees in Leeds."}, headers=user("ana"))
    assert warm.status_code == 201, warm.text  # the NER model loaded, the embedder's dimension known
    embed_server.hang()
    started = time.monotonic()
    created = bounded_api.post("/api/memory/memories", json={"text": LISBON}, headers=user("ana"))
    took = time.monotonic() - started
    assert created.status_code == 201, created.text
    assert took < 2 * REQUEST_TIMEOUT_S + SLACK_S, f"POST /memories held {took:.1f} s by a silent embedder"
    memory_id = created.json()["memory"]["id"]
    found = bounded_api.get("/api/memory/memories", params={"q": "Lisbon sister"}, headers=user("ana"))
    assert memory_id in [m["id"] for m in found.json()["memories"]]  # by keyword, at once
    health = bounded_api.get("/health").json()
    assert health["tiers"]["semantic"]["pendingVectors"] >= 1  # its vector comes later

    time.sleep(COOLDOWN_S + 0.2)  # the breaker half-open again: the edit's embedding is a real (silent) call
    started = time.monotonic()
    edited = bounded_api.put(
        f"/api/memory/memories/{memory_id}", json={"text": LISBON.replace("Lisbon", "Porto")}, headers=user("ana")
    )
    took = time.monotonic() - started
    assert edited.status_code == 200, edited.text
    assert took < 2 * REQUEST_TIMEOUT_S + SLACK_S, f"PUT /memories held {took:.1f} s by a silent embedder"
