"""The request dependencies find the caller's key once per request (one key check, one rate-limit
token), whichever of them a route uses, and the OpenAPI document still declares the bearer scheme
on every guarded operation, though it is no longer a FastAPI security dependency."""

from __future__ import annotations

from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.api_keys import ApiKeyStore
from tests.helpers import user


def test_one_token_per_request_through_every_dependency(settings: Settings) -> None:
    """``POST /import`` runs the routers' key check, ``require_service`` (via ``import_allowed``) and
    ``get_user_id``: with a burst of 2, exactly 2 requests pass the limiter (403: imports are off),
    the third is a 429 — a second check per request would have refused the second."""
    coordinator = MemoryCoordinator(settings.with_overrides(rate_limit_per_s=0.01, rate_limit_burst=2))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            key, _ = ApiKeyStore(coordinator.connector, coordinator.keys).create("service", "backend")
            headers = {"Authorization": f"Bearer {key}", **user("ann")}
            statuses = [client.post("/api/memory/import", json={}, headers=headers).status_code for _ in range(3)]
            assert statuses == [403, 403, 429]
            episodes = client.get("/api/memory/episodes", headers=headers)
            assert episodes.status_code == 429  # the same bucket, from a route with get_user_id only
            anonymous = client.get("/api/memory/episodes", headers=user("ann"))
            assert anonymous.status_code == 401
    finally:
        coordinator.close()


def test_every_guarded_operation_declares_the_bearer_scheme(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    operations = [(path, op) for path, item in spec["paths"].items() for op in item.values()]
    guarded = [op for path, op in operations if path.startswith("/api/") or path == "/metrics"]
    assert len(guarded) == 39  # the operations of the 10 guarded routers
    assert all(op.get("security") == [{"HTTPBearer": []}] for op in guarded)
    assert all("security" not in op for path, op in operations if path == "/health")
    search = spec["paths"]["/api/memory/search"]["get"]
    assert "X-User-Id" in {p["name"] for p in search["parameters"] if p["in"] == "header"}
