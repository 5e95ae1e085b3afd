"""``agtos keys create|list|revoke|off`` and ``agtos serve``'s refusal to expose an open API, through
the typer app (CliRunner) against the test Redis; keys are then used over HTTP."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app
from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user

KEY = re.compile(r"agt_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")  # token_urlsafe(32): 43 characters


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Any) -> pytest.MonkeyPatch:
    """The CLI sees only the test Redis and the test's key prefix."""
    for name in list(os.environ):
        if name.startswith("AGTOS_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("AGTOS_KEY_PREFIX", key_prefix)
    monkeypatch.setenv("AGTOS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path / "config"))
    return monkeypatch


def keys(*args: str) -> Any:
    return CliRunner().invoke(app, ["keys", *args])


def test_create_prints_only_the_key_and_it_works(cli_env: pytest.MonkeyPatch, client: TestClient) -> None:
    created = keys("create", "--user", "alice")
    assert created.exit_code == 0, created.output
    assert KEY.fullmatch(created.stdout.rstrip("\n")) and created.stdout.count("\n") == 1  # one line: the key
    key = created.stdout.strip()
    assert client.get("/api/memory/episodes").status_code == 401  # auth is on now
    mine = client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {key}"})
    assert mine.status_code == 200
    other = client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {key}", **user("bob")})
    assert other.status_code == 403
    service = keys("create", "--service", "agent-backend").stdout.strip()
    assert KEY.fullmatch(service) and service != key


@pytest.mark.parametrize(
    "args",
    [[], ["--user", "alice", "--service", "svc"], ["--user", "not a user!"], ["--service", "bad:name"]],
)
def test_create_refuses_unclear_or_invalid_subjects(cli_env: pytest.MonkeyPatch, args: list[str]) -> None:
    refused = keys("create", *args)
    assert refused.exit_code == 2 and refused.stdout == ""


def test_list_shows_no_secret_and_revoke_takes_effect(
    cli_env: pytest.MonkeyPatch, client: TestClient, coordinator: MemoryCoordinator, redis_url: str
) -> None:
    alice = keys("create", "--user", "alice").stdout.strip()
    backend = keys("create", "--service", "backend").stdout.strip()
    listed = keys("list")
    assert listed.exit_code == 0
    alice_id, backend_id = alice[4:16], backend[4:16]
    assert alice_id in listed.stdout and backend_id in listed.stdout
    assert "alice" in listed.stdout and "backend" in listed.stdout and "service" in listed.stdout
    for key in (alice, backend):
        assert key[17:] not in listed.stdout  # never the secret
    stored = coordinator.connector.run(lambda r: r.hgetall(f"{coordinator.keys.prefix}:{{auth}}:keys"))
    assert all(alice[17:].encode() not in value for value in stored.values())  # stored hashed only

    assert keys("revoke", "000000000000").exit_code == 1
    assert keys("revoke", alice_id).exit_code == 0
    assert client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {alice}"}).status_code == 401
    assert (
        client.get("/api/memory/episodes", headers={"Authorization": f"Bearer {backend}", **user("x")}).status_code
        == 200
    )
    assert keys("off").exit_code == 1  # a key is left: auth cannot be switched off
    last = keys("revoke", backend_id)
    assert last.exit_code == 0 and "auth stays on" in last.stderr
    assert client.get("/api/memory/episodes").status_code == 401  # revoking the last key opens nothing
    assert keys("off").exit_code == 0
    assert client.get("/api/memory/episodes").status_code == 200


@pytest.fixture
def uvicorn_calls(cli_env: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """uvicorn.run replaced by a recorder: no server ever starts."""
    import uvicorn

    calls: list[dict[str, Any]] = []
    cli_env.setattr(uvicorn, "run", lambda target, **kwargs: calls.append({"target": target, **kwargs}))
    return calls


def test_serve_refuses_an_open_public_bind(
    uvicorn_calls: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    refused = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and uvicorn_calls == []
    assert "refusing to serve 0.0.0.0 without authentication" in refused.stderr
    assert CliRunner().invoke(app, ["serve", "--host", "192.168.1.20"]).exit_code == 2
    assert uvicorn_calls == []

    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert CliRunner().invoke(app, ["serve", "--host", loopback]).exit_code == 0, loopback
    assert len(uvicorn_calls) == 4

    with caplog.at_level(logging.WARNING, logger="agtos.serve"):
        insecure = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--insecure"])
    assert insecure.exit_code == 0 and uvicorn_calls[-1]["host"] == "0.0.0.0"
    assert "INSECURE: serving 0.0.0.0 with NO authentication" in caplog.text


def test_serve_binds_publicly_once_auth_is_on(uvicorn_calls: list[dict[str, Any]], cli_env: pytest.MonkeyPatch) -> None:
    cli_env.setenv("AGTOS_AUTH", "required")
    assert CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"]).exit_code == 0
    cli_env.delenv("AGTOS_AUTH")
    assert keys("create", "--service", "backend").exit_code == 0
    assert CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"]).exit_code == 0
    assert [call["host"] for call in uvicorn_calls] == ["0.0.0.0", "0.0.0.0"]
