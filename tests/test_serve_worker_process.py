"""``agtos serve`` (queue mode) runs the ingestion worker as ONE child process at the lowest CPU
priority (``SCHED_IDLE``), not as a thread of the API process; a child that dies is started again;
SIGTERM to ``agtos serve`` leaves no child behind.

Real ``agtos serve`` processes on free loopback ports (REDIS_URL, and once the embedded Redis in a
temporary data directory); session ends through HTTP; the worker's identity read from the queue's
heartbeat hash in Redis (a consumer is named ``host-pid-suffix``)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import psutil  # type: ignore[import-untyped]
import pytest
import redis

from agtos.cli_worker_process import WorkerChild
from tests.helpers import delete_prefix

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")

SCHED_IDLE = 5  # <linux/sched.h>
ALICE = {"X-User-Id": "alice"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Launched:
    """An ``agtos serve`` started in ``tmp`` (its data, config and log), not yet waited for."""

    proc: subprocess.Popen[bytes]
    url: str
    tmp: Path
    env: dict[str, str]
    log: IO[bytes]

    def stop(self) -> None:
        """Kill it and its children if still running (again: a no-op), and an embedded Redis left."""
        for child in psutil.Process(self.proc.pid).children(recursive=True) if self.proc.poll() is None else []:
            child.kill()
        self.proc.kill()
        self.proc.wait(30)
        self.log.close()
        kill_embedded_redis(self.tmp)


def launch(tmp: Path, env: dict[str, str], *args: str) -> Launched:
    """``agtos serve`` on a free port, started (not waited for)."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGTOS_", "REDIS_URL"))}
    full = base | {"AGTOS_DATA_DIR": str(tmp / "data"), "AGTOS_CONFIG_DIR": str(tmp / "config"), **env}
    log = (tmp / f"serve-{port}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port), *args],
        env=full,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return Launched(proc, f"http://127.0.0.1:{port}", tmp, env, log)


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[dict[str, Launched]]:
    """Each test's ``agtos serve``, all started at once (each its own process, port, folder and key
    prefix or embedded Redis: the start-ups overlap); a test waits for its own and stops it."""
    prefixes = {name: f"agtos-test-{uuid.uuid4().hex[:10]}" for name in ("restarts", "killed", "thread")}
    on_redis = {name: {"REDIS_URL": redis_url, "AGTOS_KEY_PREFIX": prefix} for name, prefix in prefixes.items()}
    specs: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
        "restarts": (on_redis["restarts"], ()),
        "embedded": ({}, ("--workers", "2")),
        "killed": (on_redis["killed"], ()),
        "thread": (on_redis["thread"] | {"AGTOS_SERVE_WORKER": "thread"}, ()),
    }
    started: dict[str, Launched] = {}
    try:
        for name, (env, args) in specs.items():
            started[name] = launch(tmp_path_factory.mktemp(name), env, *args)
        yield started
    finally:
        for one in started.values():
            one.stop()
        for prefix in prefixes.values():
            delete_prefix(redis_url, prefix)


@contextmanager
def serve(tmp: Path, env: dict[str, str], *args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``agtos serve`` on a free port, up once ``/health`` shows a live worker; killed if still running after."""
    with served(launch(tmp, env, *args)) as up:
        yield up


@contextmanager
def served(launched: Launched) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Up once ``/health`` shows a live worker; killed if still running after."""
    proc, url = launched.proc, launched.url
    try:
        wait_for(lambda: proc.poll() is not None or queue(url).get("workersAlive", 0) >= 1, 120, "a live worker")
        assert proc.poll() is None, Path(launched.log.name).read_text()
        yield proc, url
    finally:
        launched.stop()


def kill_embedded_redis(tmp: Path) -> None:
    """An embedded Redis left by a failed test (it runs detached from ``agtos serve``, in its data dir)."""
    for found in psutil.process_iter(["name", "cwd"]):
        if found.info["name"] == "redis-server" and str(found.info["cwd"] or "").startswith(str(tmp)):
            found.kill()


def wait_for(ready: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"no {what} within {timeout_s} s")


def queue(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/health", timeout=10).json()["checks"]["ingest-queue"])


def worker_children(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The live ``agtos worker`` children (not one killed and not yet reaped)."""
    found = []
    for child in psutil.Process(proc.pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "worker" in child.cmdline():
                found.append(child)
        except psutil.Error:
            pass
    return found


def end_and_find(url: str, session: str, pet: str) -> None:
    """A session ended through HTTP is ingested by the worker (``?wait``) and then searchable."""
    turns = [{"role": "user", "content": f"I adopted a corgi named {pet} last spring."}]
    assert httpx.post(f"{url}/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=ALICE).is_success
    ended = httpx.post(f"{url}/api/memory/sessions/{session}/end", params={"wait": 30}, headers=ALICE, timeout=40)
    assert ended.json()["status"] == "done", ended.text
    found = httpx.get(f"{url}/api/memory/search", params={"q": pet}, headers=ALICE, timeout=10).json()
    assert any(pet in hit["summary"] for hit in found["results"]), found


def consumer_pids(redis_url: str, prefix: str) -> set[int]:
    """The pids in the live workers' consumer names (``host-pid-suffix``)."""
    beats = redis.Redis.from_url(redis_url).hgetall(f"{prefix}:meta:ingest-workers")
    return {int(name.decode().rsplit("-", 2)[1]) for name in beats}


def stop_and_check_no_orphan(proc: subprocess.Popen[bytes], children: list[int], redis_pid: int = 0) -> None:
    """SIGTERM to ``agtos serve``: it stops and reaps its worker child before it exits (not left to
    the child's own watch on its parent), and shuts its embedded Redis down."""
    proc.send_signal(signal.SIGTERM)
    # one API process dies of the signal after its cleanup (uvicorn raises it again); uvicorn's
    # manager of --workers N returns and serve exits 0
    assert proc.wait(40) in (-signal.SIGTERM, 0)
    assert not [pid for pid in children if psutil.pid_exists(pid)], "worker child left behind"
    deadline = time.monotonic() + 5
    while redis_pid and psutil.pid_exists(redis_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (redis_pid and psutil.pid_exists(redis_pid)), "embedded Redis left running"


def test_serve_ingests_in_one_idle_child_restarts_it_and_leaves_none(
    launched: dict[str, Launched], redis_url: str
) -> None:
    key_prefix = launched["restarts"].env["AGTOS_KEY_PREFIX"]
    with served(launched["restarts"]) as (proc, url):
        [child] = worker_children(proc)
        assert os.sched_getscheduler(child.pid) == SCHED_IDLE
        assert queue(url)["workerInProcess"] is False
        end_and_find(url, "s1", "Biscuit")
        assert consumer_pids(redis_url, key_prefix) == {child.pid}  # not the API's pid: no thread there

        child.kill()
        wait_for(lambda: [c.pid for c in worker_children(proc)] not in ([], [child.pid]), 15, "restarted child")
        [again] = worker_children(proc)
        # the child switches itself first thing, after the interpreter's start-up
        wait_for(lambda: os.sched_getscheduler(again.pid) == SCHED_IDLE, 15, "SCHED_IDLE")
        end_and_find(url, "s2", "Waffles")
        assert again.pid in consumer_pids(redis_url, key_prefix)
        stop_and_check_no_orphan(proc, [child.pid, again.pid])


def test_serve_with_the_embedded_redis_shares_it_with_the_child(launched: dict[str, Launched]) -> None:
    """``--workers 2`` and the embedded Redis: still one worker child, no thread in either API process."""
    with served(launched["embedded"]) as (proc, url):
        [child] = worker_children(proc)
        assert sum("worker" in p.cmdline() for p in psutil.Process(proc.pid).children(recursive=True)) == 1
        assert {queue(url)["workerInProcess"] for _ in range(6)} == {False}
        shared = child.environ()["REDIS_URL"]  # handed down by the serving process, which runs it
        assert shared.startswith("unix://")
        end_and_find(url, "s1", "Pretzel")
        server_pid = int(redis.Redis.from_url(shared).info("server")["process_id"])
        stop_and_check_no_orphan(proc, [child.pid], server_pid)


def test_a_child_whose_serve_was_killed_stops_by_itself(launched: dict[str, Launched]) -> None:
    """SIGKILL leaves ``agtos serve`` no chance to clean up: the child sees its parent gone and exits."""
    with served(launched["killed"]) as (proc, _url):
        [child] = worker_children(proc)
        proc.kill()
        proc.wait(10)
        try:
            wait_for(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, 15, "child exit")
        finally:
            if child.is_running():
                child.kill()


def test_thread_layout_runs_no_child(launched: dict[str, Launched], redis_url: str) -> None:
    key_prefix = launched["thread"].env["AGTOS_KEY_PREFIX"]
    with served(launched["thread"]) as (proc, url):
        assert worker_children(proc) == []
        assert queue(url)["workerInProcess"] is True
        assert consumer_pids(redis_url, key_prefix) == {proc.pid}


def test_a_child_that_keeps_dying_is_restarted_with_growing_waits() -> None:
    """Exits at once: restarted after 1 s, then 2 s (backoff doubling from 1 s); ``stop`` ends it."""
    child = WorkerChild([sys.executable, "-c", "pass"]).start()
    time.sleep(4.2)  # starts at ~0, ~1 (+1 s), ~3 (+2 s); the next would be at ~7
    child.stop()
    assert child.restarts == 2
    sleeper = WorkerChild([sys.executable, "-c", "import time; time.sleep(60)"]).start()
    wait_for(lambda: sleeper.proc is not None, 10, "child")
    started = time.monotonic()
    sleeper.stop()
    assert sleeper.proc is not None and sleeper.proc.returncode == -signal.SIGTERM
    assert time.monotonic() - started < 5 and sleeper.restarts == 0
