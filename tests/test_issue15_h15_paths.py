"""Issue 15 leftovers, both through the app whatever serves it.

An id holding an encoded slash (``a%2Fb``) was decoded into another path by the server before routing
and answered 404 (no route for ``/sessions/a/b/turns``), under ``agtos serve`` and ``uvicorn`` alike; it
is a 422 now, the one every other refused id gets. And ``uvicorn agtos.serving.main:app`` run directly
(uvicorn's default httptools protocol, not the one ``agtos serve`` names) served an absolute-form request
(``GET http://evil.example/... HTTP/1.1``) by its ``Host`` header: the app itself judges it by the target's
authority now (RFC 9112 3.2.2), checked on a real ``python -m uvicorn`` process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.helpers import delete_prefix, user
from tests.test_absolute_form_target import raw_get  # GET on a raw socket, the target as written

TURNS = {"turns": [{"role": "user", "content": "I keep my passport in the blue drawer."}]}
ID_RULES = "must be 1-128 characters of letters, digits, '_', '.' or '-' (not only dots)"


def refused_id(field: str) -> dict[str, Any]:
    """The 422 of a path id against the record-id pattern (as for ``a:b``, tests/test_blank_and_dotted_ids.py)."""
    return {"message": f"invalid request: {field}: {ID_RULES}", "errors": [{"field": field, "message": ID_RULES}]}


@pytest.mark.parametrize("slash", ["%2F", "%2f"])
def test_an_id_with_an_encoded_slash_is_a_refused_id(client: TestClient, slash: str) -> None:
    appended = client.post(f"/api/memory/sessions/a{slash}b/turns", json=TURNS, headers=user("sl"))
    assert (appended.status_code, appended.json()) == (422, refused_id("path.session_id"))
    for method, path, field in [
        ("GET", f"/api/memory/sessions/a{slash}b", "path.session_id"),
        ("POST", f"/api/memory/sessions/a{slash}b/end", "path.session_id"),
        ("GET", f"/api/memory/memories/a{slash}b", "path.memory_id"),
        ("GET", f"/api/memory/memories/x{slash}{slash}y/history", "path.memory_id"),
        ("GET", f"/api/entities/a{slash}b", "path.entity_id"),
    ]:
        answered = client.request(method, path, headers=user("sl"))
        assert (answered.status_code, answered.json()) == (422, refused_id(field)), (method, path)
    # the rest of the path is decoded as before (an escaped letter)
    assert client.post("/api/memory/sessions/%61b/turns", json=TURNS, headers=user("sl")).json()["sessionId"] == "ab"
    assert client.get("/api/memory/sessions/ab", headers=user("sl")).json()["messageCount"] == 1
    assert client.get("/api/memory/sessions/a", headers=user("sl")).status_code == 404  # nothing under 'a' or 'b'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def uvicorn_port(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[int]:
    """``python -m uvicorn agtos.serving.main:app`` with uvicorn's defaults (httptools), not ``agtos serve``."""
    tmp, port = tmp_path_factory.mktemp("uvicorn-direct"), free_port()
    prefix = f"agtos-h15-uvicorn-{port}"
    env = {name: value for name, value in os.environ.items() if not name.startswith("AGTOS_")}
    env |= {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
        "AGTOS_INGEST_MODE": "inline",
    }
    cmd = [sys.executable, "-m", "uvicorn", "agtos.serving.main:app", "--port", str(port), "--log-level", "warning"]
    log = tmp / "uvicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            pytest.fail(f"uvicorn did not answer: {log.read_text()}")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        delete_prefix(redis_url, prefix)


def test_uvicorn_run_directly_judges_an_absolute_target_by_its_authority(uvicorn_port: int) -> None:
    status, body = raw_get(uvicorn_port, "http://evil.example/api/memory/episodes", "127.0.0.1")
    assert (status, body) == (400, {"message": "Host 'evil.example' is not served here; add it to AGTOS_ALLOWED_HOSTS"})
    assert raw_get(uvicorn_port, "http://evil.example:4102/health", "localhost")[0] == 400
    served = raw_get(uvicorn_port, f"http://127.0.0.1:{uvicorn_port}/api/memory/episodes", "evil.example")
    assert served == (200, {"episodes": [], "count": 0, "available": True})
    assert raw_get(uvicorn_port, "/api/memory/episodes", "127.0.0.1")[0] == 200  # origin-form: the Host header
    assert raw_get(uvicorn_port, "/api/memory/episodes", "evil.example")[0] == 400


def test_uvicorn_run_directly_refuses_an_id_with_an_encoded_slash(uvicorn_port: int) -> None:
    base, headers = f"http://127.0.0.1:{uvicorn_port}", user("sl")
    appended = httpx.post(f"{base}/api/memory/sessions/a%2Fb/turns", json=TURNS, headers=headers, timeout=30)
    assert (appended.status_code, appended.json()) == (422, refused_id("path.session_id"))
    assert raw_get(uvicorn_port, "/api/memory/sessions/a%2Fb", "127.0.0.1") == (422, refused_id("path.session_id"))
    assert raw_get(uvicorn_port, "/api/memory/sessions/a", "127.0.0.1")[0] == 404
    # escaped twice: decoded once by the server, an id holding '%2F' (a 422 before too)
    assert raw_get(uvicorn_port, "/api/memory/sessions/a%252Fb", "127.0.0.1") == (422, refused_id("path.session_id"))
    assert raw_get(uvicorn_port, "/api/memory/sessions/%61b", "127.0.0.1")[0] == 404  # 'ab': no live session
