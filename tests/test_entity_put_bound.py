"""An entity's rename over HTTP waits on a silent remote embedder at most the request bound (issue 15).

``PUT /api/entities/{id}`` with a new name embeds that name. It waited the embedder's batch timeout
(``AGTOS_EMBEDDING_TIMEOUT_S``, 30 s by default) for a service that accepts and never answers; it now
waits ``AGTOS_EMBEDDING_REQUEST_TIMEOUT_S`` at most, as a memory's ``PUT`` does, writes the name and
leaves its vector to the repair sweep, which embeds the stored name. Through HTTP with the hung
Ollama-style stub of test_embedder_breaker (its vectors: :func:`tests.stub_servers.hash_embedding`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from tests.helpers import run_maintenance, user
from tests.stub_servers import hash_embedding
from tests.test_embedder_breaker import HangableEmbedServer
from tests.test_probe_recent import LONG_BATCH_TIMEOUT_S, REQUEST_TIMEOUT_S, SLACK_S, embed_server, served

__all__ = ["embed_server"]  # the fixture, used here by name

WHO = "ana"
NEW_NAME = "Leeds Hive Cooperative"


@pytest.fixture
def api(settings: Settings, embed_server: HangableEmbedServer) -> Iterator[TestClient]:
    """The API over the stub, a maintenance run carried out at once."""
    sweep = MaintenanceConfig(guard_retries=0, guard_delay_s=0.0)
    with served(settings, embed_server, background_work_policy="always", maintenance=sweep) as client:
        yield client


def pending(client: TestClient) -> int:
    return int(client.get("/health").json()["tiers"]["semantic"]["pendingVectors"])


def test_an_entity_renamed_while_the_embedder_is_silent_waits_the_request_bound(
    api: TestClient, embed_server: HangableEmbedServer, raw_redis: redis.Redis, key_prefix: str
) -> None:
    assert REQUEST_TIMEOUT_S + SLACK_S < LONG_BATCH_TIMEOUT_S  # the bound is what the test can tell apart
    warm = api.post("/api/memory/memories", json={"text": "I keep bees in Leeds."}, headers=user(WHO))
    assert warm.status_code == 201, warm.text  # the NER model loaded, the embedder's dimension known
    listed = api.get("/api/entities", params={"limit": 100}, headers=user(WHO)).json()["entities"]
    leeds = next(e["id"] for e in listed if e["name"] == "Leeds")
    assert pending(api) == 0

    embed_server.hang()
    started = time.monotonic()
    renamed = api.put(f"/api/entities/{leeds}", json={"name": NEW_NAME}, headers=user(WHO))
    took = time.monotonic() - started
    assert renamed.status_code == 200, renamed.text
    assert took < REQUEST_TIMEOUT_S + SLACK_S, f"PUT /entities held {took:.1f} s by a silent embedder"
    assert renamed.json()["entity"]["name"] == NEW_NAME and renamed.json()["entity"]["aliases"] == ["Leeds"]
    assert pending(api) == 1  # its vector comes later
    vectors = f"{key_prefix}:u:{{{WHO}}}:entity:_idx:vec:data"
    assert raw_redis.hget(vectors, leeds) is None  # not the old name's any more

    embed_server.answer()
    run = run_maintenance(api, WHO)
    assert run["status"] == "completed", run
    assert pending(api) == 0
    blob = raw_redis.hget(vectors, leeds)
    assert blob is not None, "the renamed entity got no vector from the repair sweep"
    stored, expected = np.frombuffer(blob, dtype="<f4"), np.array(hash_embedding(NEW_NAME))
    assert float(stored @ expected / (np.linalg.norm(stored) * np.linalg.norm(expected))) == pytest.approx(1.0)
