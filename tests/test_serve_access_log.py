"""``agtos serve`` logs a line per request only with ``--access-log`` or ``AGTOS_ACCESS_LOG=true``
(each line costs the event loop, which every request goes through, formatting and a write).

A real ``agtos serve`` process on a free loopback port, queue mode without a worker thread; its
output is read after it stops.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ACCESS_LINE = '"GET /health HTTP/1.1" 200'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_output(tmp: Path, redis_url: str, args: list[str], env: dict[str, str]) -> str:
    """Start ``agtos serve`` with ``args``, ask ``/health`` twice, stop it; its output."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    full_env = {name: value for name, value in os.environ.items() if name != "AGTOS_ACCESS_LOG"}
    full_env |= {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": f"agtos-accesslog-{port}",
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
        **env,
    }
    cmd = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port), "--no-worker", *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline, answered = time.monotonic() + 120, 0
            while answered < 2 and time.monotonic() < deadline and proc.poll() is None:
                try:
                    answered += httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
                except httpx.HTTPError:
                    time.sleep(0.3)
            assert answered == 2, log.read_text()
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    return log.read_text()


@pytest.mark.parametrize(
    ("args", "env", "logged"),
    [
        ([], {}, False),
        (["--access-log"], {}, True),
        ([], {"AGTOS_ACCESS_LOG": "true"}, True),
        (["--no-access-log"], {"AGTOS_ACCESS_LOG": "true"}, False),
    ],
    ids=["default-off", "flag-on", "env-on", "flag-over-env"],
)
def test_serve_access_log(tmp_path: Path, redis_url: str, args: list[str], env: dict[str, str], logged: bool) -> None:
    output = serve_output(tmp_path, redis_url, args, env)
    assert "Application startup complete" in output  # the server's own log stays
    assert output.count(ACCESS_LINE) == (2 if logged else 0), output


def test_an_invalid_access_log_value_stops_serve_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "AGTOS_ACCESS_LOG": "sometimes", "AGTOS_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(free_port())]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "AGTOS_ACCESS_LOG='sometimes': expected true/false" in done.stderr
