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


CASES = {  # id: (serve's arguments, its environment, whether it logs the requests)
    "default-off": ([], {}, False),
    "flag-on": (["--access-log"], {}, True),
    "env-on": ([], {"AGTOS_ACCESS_LOG": "true"}, True),
    "flag-over-env": (["--no-access-log"], {"AGTOS_ACCESS_LOG": "true"}, False),
}


def start_serve(tmp: Path, redis_url: str, args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``agtos serve`` with ``args`` and ``env``, its output in ``tmp/serve-<port>.log``."""
    port = free_port()
    full_env = {name: value for name, value in os.environ.items() if name != "AGTOS_ACCESS_LOG"}
    full_env |= {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": f"agtos-accesslog-{port}",
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
        **env,
    }
    cmd = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port), "--no-worker", *args]
    with (tmp / f"serve-{port}.log").open("wb") as out:
        return subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT), port


def ask_health_twice(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline, answered = time.monotonic() + 120, 0
    while answered < 2 and time.monotonic() < deadline and proc.poll() is None:
        try:
            answered += httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            time.sleep(0.3)
    assert answered == 2, log.read_text()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> dict[str, str]:
    """Each case's ``agtos serve`` (all started at once, each its own process, port, prefix and
    log: the start-ups overlap), asked ``/health`` twice and stopped; its output by case id."""
    tmp = tmp_path_factory.mktemp("access-log")
    started: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for case, (args, env, _logged) in CASES.items():
            (tmp / case).mkdir()
            started[case] = start_serve(tmp / case, redis_url, args, env)
        for case, (proc, port) in started.items():
            ask_health_twice(proc, port, tmp / case / f"serve-{port}.log")
    finally:
        for proc, _port in started.values():
            proc.terminate()
        for proc, _port in started.values():
            proc.wait(timeout=60)
    return {case: (tmp / case / f"serve-{port}.log").read_text() for case, (_proc, port) in started.items()}


@pytest.mark.parametrize("case", CASES)
def test_serve_access_log(outputs: dict[str, str], case: str) -> None:
    output, logged = outputs[case], CASES[case][2]
    assert "Application startup complete" in output  # the server's own log stays
    assert output.count(ACCESS_LINE) == (2 if logged else 0), output


def test_an_invalid_access_log_value_stops_serve_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "AGTOS_ACCESS_LOG": "sometimes", "AGTOS_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(free_port())]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "agtos: invalid setting: AGTOS_ACCESS_LOG='sometimes' is not a boolean" in done.stderr
