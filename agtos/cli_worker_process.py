"""``agtos serve``'s ingestion worker as a child process: lowest CPU priority, restarted when it dies.

The API processes then run no worker thread, so session-end ingestion (NER, embedding, entities,
the Dreamer) does not share their GIL; at ``SCHED_IDLE`` the child takes CPU only when nothing
else on the machine wants it, and works the queue off once the requests stop.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import NoReturn

import typer

log = logging.getLogger("agtos.serve")

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0  # a child that ran this long restarts after the shortest wait again
STOP_TIMEOUT_S = 30.0  # SIGTERM lets it finish the job in hand; SIGKILL after this


class WorkerLayout(StrEnum):
    """Where ``agtos serve`` (queue mode) runs the ingestion worker."""

    process = "process"  # one ``agtos worker`` child at the lowest CPU priority (the default)
    thread = "thread"  # a thread in each API process, yielding to the requests in flight
    none = "none"  # nowhere: separate ``agtos worker`` processes work the queue


def invalid_setting(message: str) -> NoReturn:
    """End any ``agtos`` command as every invalid setting does: one line on stderr, exit 2."""
    typer.echo(f"agtos: invalid setting: {message}", err=True)
    raise SystemExit(2)


def worker_layout(flag: WorkerLayout | None, no_worker: bool) -> WorkerLayout:
    """``--no-worker``, else ``--worker``, else ``AGTOS_SERVE_WORKER``, else ``none`` when
    ``AGTOS_INGEST_WORKER`` is false (the API's worker thread switched off), else ``process``."""
    if no_worker:
        if flag not in (None, WorkerLayout.none):
            raise typer.BadParameter(f"--no-worker contradicts --worker {flag.value}")
        return WorkerLayout.none
    if flag is not None:
        return flag
    raw = os.environ.get("AGTOS_SERVE_WORKER", "").strip()
    if raw:
        try:
            return WorkerLayout(raw.lower())
        except ValueError:
            invalid_setting(f"AGTOS_SERVE_WORKER must be one of 'process', 'thread' or 'none', not {raw!r}")
    if os.environ.get("AGTOS_INGEST_WORKER", "").strip().lower() in ("false", "0", "no", "off"):
        return WorkerLayout.none
    return WorkerLayout.process


def lowest_cpu_priority() -> str:
    """Put this process (its calling thread and every thread started after) at ``SCHED_IDLE`` where
    the OS has it (Linux), else at nice 19; returns which."""
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except OSError as exc:
            log.warning("SCHED_IDLE refused (%s); using nice 19", exc)
    os.nice(19 - os.nice(0))
    return "nice 19"


def exit_with_parent(parent: int, stop: threading.Event, poll_s: float = 1.0) -> None:
    """Set ``stop`` once ``parent`` is no longer this process's parent (it died, even by SIGKILL)."""

    def watch() -> None:
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                log.warning("parent process %d is gone; stopping", parent)
                stop.set()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class WorkerChild:
    """One ``agtos worker`` child, restarted (with backoff, logged) whenever it exits until
    :meth:`stop`, which terminates it and waits for it. The child runs in its own session, so a
    terminal's Ctrl-C reaches ``agtos serve``, which then stops it (no restart race)."""

    def __init__(self, command: list[str] | None = None) -> None:
        self.command = command or [
            sys.executable,
            "-m",
            "agtos.cli",
            "worker",
            "--idle-priority",
            "--parent",
            str(os.getpid()),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> WorkerChild:
        self._thread = threading.Thread(target=self._supervise, name="worker-supervisor", daemon=True)
        self._thread.start()
        return self

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self._stop.is_set():
                return None
            self.proc = subprocess.Popen(self.command, start_new_session=True)
            return self.proc

    def _supervise(self) -> None:
        delay = BACKOFF_MIN_S
        while (proc := self._spawn()) is not None:
            started = time.monotonic()
            log.info("ingest worker process %d started", proc.pid)
            code = proc.wait()
            if self._stop.is_set():
                return
            if time.monotonic() - started >= STABLE_S:
                delay = BACKOFF_MIN_S
            log.warning("ingest worker process %d exited (%s); restarting in %.0f s", proc.pid, code, delay)
            if self._stop.wait(delay):
                return
            self.restarts += 1
            delay = min(BACKOFF_MAX_S, delay * 2)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``timeout_s``) and wait for it."""
        self._stop.set()
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("ingest worker process %d did not stop in %.0f s; killing it", proc.pid, timeout_s)
                proc.kill()
                proc.wait()
        if self._thread is not None:
            self._thread.join(timeout_s)


@contextmanager
def worker_child(run: bool) -> Iterator[WorkerChild | None]:
    """A supervised worker child for the duration of the block (none unless ``run``)."""
    if not run:
        yield None
        return
    child = WorkerChild().start()
    try:
        yield child
    finally:
        child.stop()


class Terminated(BaseException):
    """SIGTERM arrived: unwinds ``agtos serve`` so that its ``with`` blocks clean up."""


def _terminated(_sig: int, _frame: object) -> None:
    raise Terminated


@contextmanager
def cleanup_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM unwinds the main thread (cleanups run: the worker child stopped,
    the embedded Redis shut down); then the process still dies of SIGTERM. uvicorn, once it has
    stopped, raises again the signal it caught, which would otherwise kill the process at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
