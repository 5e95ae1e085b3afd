"""`agtos serve --port` and `agtos mcp --http --port` take a TCP port (1-65535), as AGTOS_PORT does: `--port 99999`
printed "Uvicorn running on http://127.0.0.1:99999" and listened on 34463 (99999 mod 65536), where no client looks."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from agtos.cli import app


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str) -> list[dict[str, Any]]:
    """What `uvicorn.run` and the MCP server's `run` were called with (nothing is served)."""
    import uvicorn

    import agtos.mcp_server

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append(kwargs))
    monkeypatch.setattr(agtos.mcp_server, "run", lambda *args: calls.append({"port": args[5]}))
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("AGTOS_KEY_PREFIX", key_prefix)
    monkeypatch.delenv("AGTOS_PORT", raising=False)
    return calls


SERVE = ["serve", "--ingest-mode", "inline", "--no-worker"]
MCP = ["mcp", "--http", "--url", "http://127.0.0.1:4102", "--user", "alice"]


@pytest.mark.parametrize("command", [SERVE, MCP], ids=["serve", "mcp"])
@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1"])
def test_a_port_outside_the_tcp_range_is_refused_before_anything_starts(
    started: list[dict[str, Any]], command: list[str], port: str
) -> None:
    refused = CliRunner().invoke(app, [*command, "--port", port])
    assert refused.exit_code == 2, refused.output
    assert "--port" in refused.output
    assert started == []


@pytest.mark.parametrize(("command", "port"), [(SERVE, 65535), (SERVE, 1), (MCP, 4103)], ids=["serve", "low", "mcp"])
def test_a_port_in_range_is_the_one_served(started: list[dict[str, Any]], command: list[str], port: int) -> None:
    served = CliRunner().invoke(app, [*command, "--port", str(port)])
    assert served.exit_code == 0, served.output
    assert [call["port"] for call in started] == [port]
