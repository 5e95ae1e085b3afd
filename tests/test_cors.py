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


def test_a_listed_origin_may_use_every_method_header_and_error_header(cors_client: TestClient) -> None:
    """The README's CORS promise in full: a listed origin's page may DELETE and PUT, send its key in
    Authorization (and JSON), and read Retry-After, Location and WWW-Authenticate of the answers."""
    for method in ("GET", "POST", "PUT", "DELETE"):
        asked = {**preflight(APP, method), "Access-Control-Request-Headers": "authorization, content-type, x-user-id"}
        granted = cors_client.options("/api/memory/memories/mem-1", headers=asked)
        assert granted.status_code == 200, (method, granted.text)
        assert method in granted.headers["access-control-allow-methods"].split(", ")
        assert {"authorization", "content-type", "x-user-id"} <= {
            h.strip().lower() for h in granted.headers["access-control-allow-headers"].split(",")
        }
    read = cors_client.get("/api/memory/episodes", headers={**user("cora"), "Origin": APP})
    assert read.status_code == 200
    exposed = {h.strip().lower() for h in read.headers["access-control-expose-headers"].split(",")}
    assert exposed == {"retry-after", "location", "www-authenticate"}


def test_a_wrong_method_is_a_plain_405_not_the_cors_hint(client: TestClient) -> None:
    """Only OPTIONS gets the AGTOS_CORS_ORIGINS hint: a GET of a POST-only path is the usual 405."""
    wrong = client.get("/api/memory/sessions/s1/turns", headers=user("cora"))
    assert (wrong.status_code, wrong.json(), wrong.headers["allow"]) == (405, {"message": "Method Not Allowed"}, "POST")
