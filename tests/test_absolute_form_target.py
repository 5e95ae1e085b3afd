"""An absolute-form request target's authority is judged by the Host allow-list, not the ``Host`` header.

``GET http://evil.example/api/memory/episodes HTTP/1.1`` with ``Host: 127.0.0.1`` was served (black-box
probe of ``agtos serve``, issue 15): RFC 9112 section 3.2.2 makes the target's authority the request's
host. httpx rewrites such targets, so the requests go on a raw socket to a real uvicorn on a loopback
port, with the protocol ``agtos serve`` names (httptools) and with uvicorn's h11.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.serving.http_protocol import PROTOCOL
from tests.helpers import served_by_uvicorn


def serve(coordinator: MemoryCoordinator, http: str) -> AbstractContextManager[int]:
    return served_by_uvicorn(create_app(coordinator=coordinator), http)


@pytest.fixture(params=[PROTOCOL, "h11"], ids=["agtos-serve-protocol", "h11"])
def port(request: pytest.FixtureRequest, coordinator: MemoryCoordinator) -> Iterator[int]:
    with serve(coordinator, request.param) as served:
        yield served


def raw_get(port: int, target: str, host: str) -> tuple[int, dict[str, Any]]:
    """``GET target`` on a raw socket (sent as written); the status and the JSON body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nX-User-Id: abs\r\nConnection: close\r\n\r\n"
        conn.sendall(request.encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_foreign_authority_in_the_target_is_refused_whatever_the_host_header(port: int) -> None:
    status, body = raw_get(port, "http://evil.example/api/memory/episodes", "127.0.0.1")
    assert (status, body) == (400, {"message": "Host 'evil.example' is not served here; add it to AGTOS_ALLOWED_HOSTS"})
    assert raw_get(port, "http://evil.example:4102/health", "localhost")[0] == 400


def test_an_allowed_authority_in_the_target_is_served_and_the_host_header_ignored(
    coordinator: MemoryCoordinator,
) -> None:
    """With ``agtos serve``'s protocol (under h11 the scope's path is the whole target: a 404)."""
    with serve(coordinator, PROTOCOL) as port:
        status, body = raw_get(port, f"http://127.0.0.1:{port}/api/memory/episodes", "evil.example")
        assert (status, body) == (200, {"episodes": [], "count": 0, "available": True})
        assert raw_get(port, "/api/memory/episodes", "127.0.0.1")[0] == 200  # origin-form: Host as before
        assert raw_get(port, "/api/memory/episodes", "evil.example")[0] == 400


def test_agtos_serve_runs_uvicorn_with_that_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn.run replaced by a recorder: no server starts."""
    from agtos.cli import app

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda target, **kwargs: calls.append(kwargs))
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # not started: run is a recorder
    assert CliRunner().invoke(app, ["serve", "--no-worker"]).exit_code == 0
    assert [c["http"] for c in calls] == ["agtos.serving.http_protocol:AbsoluteFormProtocol"]
