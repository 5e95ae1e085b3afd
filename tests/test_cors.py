"""CORS is off unless AGTOS_CORS_ORIGINS lists browser origins (issue 15, H3): off, a preflight is a JSON
405 saying how to turn it on and no response grants an origin; on, only the listed origins get the
preflight, the response headers and the exception to the cross-site write guard."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings, SettingsError
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user

APP = "https://app.example.com"
TURNS = {"turns": [{"role": "user", "content": "hello"}]}


def preflight(origin: str, method: str = "POST") -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": "x-user-id"}


@pytest.fixture
def cors_client(settings: Settings) -> Iterator[TestClient]:
    coordinator = MemoryCoordinator(settings.with_overrides(cors_origins=f"{APP}/, http://localhost:5173"))
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client
    coordinator.close()


def test_cors_is_off_by_default(client: TestClient) -> None:
    answered = client.options("/api/memory/sessions/s1/turns", headers=preflight(APP))
    assert answered.status_code == 405
    assert answered.headers["content-type"] == "application/json" and answered.headers["allow"] == "POST"
    assert "AGTOS_CORS_ORIGINS" in answered.json()["message"]
    assert "access-control-allow-origin" not in answered.headers
    read = client.get("/api/memory/episodes", headers={**user("cora"), "Origin": APP})
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
    write = client.post("/api/memory/sessions/s1/turns", json=TURNS, headers={**user("cora"), "Origin": APP})
    assert write.status_code == 403


def test_listed_origins_only(cors_client: TestClient) -> None:
    granted = cors_client.options("/api/memory/sessions/s1/turns", headers=preflight(APP))
    assert granted.status_code == 200
    assert granted.headers["access-control-allow-origin"] == APP
    assert "x-user-id" in granted.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in granted.headers  # keys travel in Authorization, no cookies
    write = cors_client.post("/api/memory/sessions/s1/turns", json=TURNS, headers={**user("cora"), "Origin": APP})
    assert write.status_code == 200 and write.headers["access-control-allow-origin"] == APP
    form = cors_client.post(  # a listed origin still sends JSON
        "/api/memory/forget", content=b"kind=all", headers={**user("cora"), "Origin": APP, "Content-Type": "text/plain"}
    )
    assert form.status_code == 415
    other = cors_client.options("/api/memory/sessions/s1/turns", headers=preflight("https://evil.example"))
    assert other.status_code == 400 and other.json()["message"].startswith("CORS preflight refused")
    assert "access-control-allow-origin" not in other.headers
    evil = {**user("cora"), "Origin": "https://evil.example"}
    assert cors_client.post("/api/memory/sessions/s1/end", headers=evil).status_code == 403


@pytest.mark.parametrize("origins", ["*", "https://app.example.com/path", "app.example.com"])
def test_only_origins_are_listed(origins: str) -> None:
    with pytest.raises(SettingsError, match="AGTOS_CORS_ORIGINS"):
        Settings(cors_origins=origins)
