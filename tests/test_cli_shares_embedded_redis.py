"""A CLI command run beside `make run` (no REDIS_URL) uses the embedded Redis `agtos serve` started and leaves it
running: `agtos keys create`, the README's first step of "Authentication", shut that server down on exit, so the
running API lost its Redis (every call then 503 or `available: false`) until it was restarted. Whichever process
started the server, the last one holding it stops it (one killed with SIGKILL no longer counts)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from agtos.cli import app
from agtos.storage.redis_conn import EmbeddedRedis, _socket_answers, embedded_socket

pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def embedded_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The CLI's environment as a new user has it: no REDIS_URL, the data directory `agtos serve` uses."""
    for name in list(os.environ):
        if name.startswith("AGTOS_") or name == "REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AGTOS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "data"


def test_keys_commands_leave_the_served_embedded_redis_running(embedded_env: Path) -> None:
    server = EmbeddedRedis(embedded_env / "redis")  # what `agtos serve` starts
    try:
        created = CliRunner().invoke(app, ["keys", "create", "--user", "alice"])
        assert created.exit_code == 0, created.output
        assert redis.Redis(unix_socket_path=server.socket_path).ping()  # before: ConnectionError, server gone
        listed = CliRunner().invoke(app, ["keys", "list"])
        assert listed.exit_code == 0, listed.output
        assert "alice" in listed.stdout and "1 API key(s)" in listed.stdout
        stored = redis.Redis(unix_socket_path=server.socket_path).hlen("agtos:{auth}:keys")
        assert stored == 1  # the key went into the served server, not into one of the command's own
        assert embedded_socket(embedded_env) == server.socket_path
    finally:
        server.stop()
    assert not _socket_answers(server.socket_path)  # its owner still stops it


def test_a_cli_command_without_a_server_stops_the_one_it_started(embedded_env: Path) -> None:
    created = CliRunner().invoke(app, ["keys", "create", "--service", "agent"])
    assert created.exit_code == 0, created.output
    assert embedded_socket(embedded_env) is None  # stopped and unregistered: nothing left running
    server = EmbeddedRedis(embedded_env / "redis")  # its AOF kept the key
    try:
        assert redis.Redis(unix_socket_path=server.socket_path).hlen("agtos:{auth}:keys") == 1
    finally:
        server.stop()


def test_whichever_process_started_it_the_last_holder_stops_it(embedded_env: Path) -> None:
    first = EmbeddedRedis(embedded_env / "redis")  # e.g. `agtos mcp` (API in process) started it
    served = EmbeddedRedis(embedded_env / "redis")  # then `agtos serve` on the same data directory
    assert served.socket_path == first.socket_path
    try:
        first.stop()
        assert redis.Redis(unix_socket_path=served.socket_path).ping()  # before: the server went with its starter
        assert embedded_socket(embedded_env) == served.socket_path  # still registered for the next command
    finally:
        served.stop()
    assert not _socket_answers(served.socket_path)  # the last holder stopped it
    assert embedded_socket(embedded_env) is None
    assert not Path(served.socket_path).parent.exists()  # the starter's socket directory went with it


def test_a_server_whose_starter_was_killed_is_stopped_by_the_next_holder(embedded_env: Path) -> None:
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from agtos.storage.redis_conn import EmbeddedRedis; "
            "print(EmbeddedRedis(Path(sys.argv[1])).socket_path, flush=True); time.sleep(120)",
            str(embedded_env / "redis"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    socket_path = starter.stdout.readline().strip()
    starter.send_signal(signal.SIGKILL)  # its redis-server (a daemon) runs on
    starter.wait(timeout=10)
    assert _socket_answers(socket_path)
    served = EmbeddedRedis(embedded_env / "redis")
    assert served.socket_path == socket_path  # joined it through the registry
    served.stop()
    assert not _socket_answers(socket_path)  # before: left running by every later serve, for good
    assert embedded_socket(embedded_env) is None


def test_two_holders_stopped_back_to_back_leave_no_server(embedded_env: Path) -> None:
    """The first holder's closed connection may still be listed when the second counts: before its name was cleared
    first, the last holder counted it and left the server running (1 try in 2 to 8)."""
    for attempt in range(20):
        first = EmbeddedRedis(embedded_env / f"redis{attempt}")
        second = EmbeddedRedis(embedded_env / f"redis{attempt}")
        first.stop()
        second.stop()
        assert not _socket_answers(second.socket_path), attempt
