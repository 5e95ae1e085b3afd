"""Issue 15 audited from outside: what a live ``agtos serve`` still got wrong, each through HTTP on a real Redis.

An outside-in pass (schemathesis with every check against ``/openapi.json``, auth off and with user and
service keys; hand probes of each failure the issue lists, Redis killed and restarted) found two gaps:
the open ``/health`` and a back-fill's ``degraded`` note named the remote embedder's address (its URL
with any credentials in it), and the state-changing routes answer 413 for an oversized body without
documenting it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import EmbeddingConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user


def closed_port() -> int:
    """A loopback port nothing listens on (a connection is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def unreachable_embedder(settings: Settings) -> Iterator[tuple[TestClient, int]]:
    """An API whose embedder is an Ollama at a refused address, its URL carrying a password; a model
    name with no published dimension, so the embedder cannot be built until the service answers."""
    port = closed_port()
    embedding = EmbeddingConfig(
        provider="ollama",
        model="in-house-embedder",
        base_url=f"http://svc-user:s3cret-Pa55@127.0.0.1:{port}",
        timeout_s=2,
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, port
    finally:
        coordinator.close()


def leaked(text: str, port: int) -> list[str]:
    return [part for part in ("s3cret-Pa55", "svc-user", "127.0.0.1", str(port), "http://") if part in text]


def test_the_open_health_names_no_embedding_service_address(unreachable_embedder: tuple[TestClient, int]) -> None:
    client, port = unreachable_embedder
    health = client.get("/health")  # open to anyone, also once auth is on
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "degraded" and "semantic" in body["degraded"]  # it still says what is down
    assert body["tiers"]["semantic"]["degradedTo"] == "keyword search (embedder unavailable)"
    assert leaked(health.text, port) == []


def test_a_backfill_stored_without_vectors_says_so_without_the_address(
    unreachable_embedder: tuple[TestClient, int],
) -> None:
    client, port = unreachable_embedder
    turns = [
        {"role": "user", "content": "My sister Maria lives in Berlin and works at Siemens."},
        {"role": "assistant", "content": "Got it, Maria in Berlin."},
        {"role": "user", "content": "I always prefer tea over coffee in the morning."},
    ]
    stored = client.post(
        "/api/memory/conversations", json={"sessions": [{"id": "b1", "turns": turns}]}, headers=user("ann")
    )
    assert stored.status_code == 200 and stored.json()["stored"] == 1
    assert stored.json()["degraded"].startswith("embedder unavailable, stored for keyword search only")
    assert leaked(stored.text, port) == []
    found = client.get("/api/memory/search", params={"q": "Maria Berlin"}, headers=user("ann"))
    assert [hit["sessionId"] for hit in found.json()["results"]] == ["b1"]  # kept for keyword search


# -- OpenAPI: the 413 every route answers -----------------------------------------------------------------


def filled(path: str) -> str:
    """``path`` with each ``{parameter}`` replaced by a valid id."""
    parts = [("x1" if p.startswith("{") else p) for p in path.split("/")]
    return "/".join(parts)


def every_operation(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Each operation of the document, and HEAD with its GET's responses (served as the GET)."""
    ops = [(m, path, op) for path, item in spec["paths"].items() for m, op in item.items()]
    return ops + [("head", path, op) for m, path, op in ops if m == "get"]


def test_every_operation_documents_the_413_it_answers_for_an_oversized_body(settings: Settings) -> None:
    """The body limit refuses any request whose body is too large, also on routes that read none
    (``/sessions/{id}/end``, ``/dream``, ``/maintain``, the DELETEs, and every GET and HEAD: a GET with
    a 2 MB body was a 413 its operation did not list): the document must list it."""
    coordinator = MemoryCoordinator(settings.with_overrides(max_body_bytes=64))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            spec = client.get("/openapi.json").json()
            operations = every_operation(spec)
            assert len(operations) >= 50
            oversized = b'{"padding": "' + b"x" * 100 + b'"}'
            undocumented = []
            for method, path, op in operations:
                answered = client.request(
                    method.upper(),
                    filled(path),
                    content=oversized,
                    headers={**user("olly"), "Content-Type": "application/json"},
                )
                assert answered.status_code == 413, (method, path, answered.status_code)
                if "413" not in op["responses"]:
                    undocumented.append(f"{method.upper()} {path}")
            assert undocumented == []
    finally:
        coordinator.close()
