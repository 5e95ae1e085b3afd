"""Issue 15 leftovers: the OpenAPI document declares the headers the API sends with its errors, and
the API sends them: ``WWW-Authenticate: Bearer`` with a 401, ``Retry-After`` (whole seconds) with a
429 (the key's rate limit) and with a 503 (Redis down: the keys cannot be checked, or a turn cannot
be journalled)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore
from tests.helpers import user
from tests.redis_process import RedisProcess
from tests.test_api_contract import EXPECTED

WWW_AUTHENTICATE = {
    "WWW-Authenticate": {
        "description": "The scheme to send a key with",
        "required": True,
        "schema": {"type": "string", "enum": ["Bearer"]},
    }
}
RETRY_AFTER = {
    "Retry-After": {
        "description": "Whole seconds to wait before retrying",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
HEADERS = {"401": WWW_AUTHENTICATE, "429": RETRY_AFTER, "503": RETRY_AFTER}
TURN = {"turns": [{"role": "user", "content": "I keep my passport in the blue drawer."}]}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    stand_in = cast(MemoryCoordinator, SimpleNamespace(settings=Settings()))
    served = TestClient(create_app(coordinator=stand_in)).get("/openapi.json")  # as a client reads it (no lifespan)
    return dict(served.json())


@pytest.mark.parametrize("status", sorted(HEADERS))
def test_every_operation_that_can_answer_the_status_documents_its_headers(spec: dict[str, Any], status: str) -> None:
    documented = {
        f"{method.upper()} {path}": op["responses"][status].get("headers")
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if status in op["responses"]
    }
    expected = {label for label, codes in EXPECTED.items() if int(status) in codes}
    assert set(documented) == expected  # the routes that can answer it (tests/test_api_contract.py's table)
    assert len(expected) == 39  # every operation but GET /health
    assert documented == dict.fromkeys(expected, HEADERS[status])


def test_no_other_error_status_documents_headers(spec: dict[str, Any]) -> None:
    for path, item in spec["paths"].items():
        for method, op in item.items():
            for status, response in op["responses"].items():
                assert status in HEADERS or int(status) < 400 or "headers" not in response, (method, path, status)


def test_a_401_says_bearer(client: TestClient, coordinator: MemoryCoordinator) -> None:
    key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("user", "alice")
    for headers in ({}, {"Authorization": "Bearer agt_nonsense"}):
        refused = client.post("/api/memory/sessions/s1/turns", json=TURN, headers=headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
    assert client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_a_429_says_when_to_retry(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(rate_limit_per_s=0.2, rate_limit_burst=1))
    key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("user", "alice")
    bearer = {"Authorization": f"Bearer {key}"}
    with TestClient(create_app(coordinator=coordinator)) as client:
        assert client.get("/api/memory/episodes", headers=bearer).status_code == 200
        limited = client.get("/api/memory/sources", headers=bearer)
    coordinator.close()
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) == 5  # one token every 5 s


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.stop()


def test_a_503_says_when_to_retry(private_redis: RedisProcess, tmp_path: Path) -> None:
    settings = Settings(redis_url=private_redis.url, key_prefix="hdr", data_dir=tmp_path, redis_timeout_s=0.3)
    coordinator = MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            assert client.post("/api/memory/sessions/s1/turns", json=TURN, headers=user("alice")).status_code == 200
            private_redis.stop()
            refused = client.post("/api/memory/sessions/s1/turns", json=TURN, headers=user("alice"))  # the journal
        with TestClient(create_app(coordinator=coordinator)) as fresh:  # never saw auth off: the key check
            unchecked = fresh.get("/metrics")
    finally:
        coordinator.close()
    for down in (refused, unchecked):
        assert down.status_code == 503
        assert down.json() == {"message": "memory storage (Redis) is unavailable; try again later"}
        assert int(down.headers["retry-after"]) == 2
