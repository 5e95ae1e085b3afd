"""``agtos worker``: the ingestion worker as its own process, and the ingestion settings of ``agtos serve``."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

import typer

from agtos.cli_worker_process import WorkerLayout, exit_with_parent, lowest_cpu_priority
from agtos.config import Settings


class IngestModeOption(StrEnum):
    inline = "inline"
    queue = "queue"


def running_embedded_redis(settings: Settings) -> str | None:
    """``unix://`` URL of the embedded Redis an ``agtos serve`` on this data directory runs, if it answers."""
    from agtos.storage.redis_conn import _socket_answers, embedded_socket

    path = embedded_socket(settings.data_dir)
    return f"unix://{path}" if path and _socket_answers(path) else None


@contextmanager
def shared_embedded_redis(settings: Settings, workers: int, worker_child: bool = False) -> Iterator[None]:
    """``agtos serve --workers N`` (N > 1), or with its worker child, without REDIS_URL: the serving
    process itself starts the embedded Redis and hands its socket to the workers (and the child) as
    REDIS_URL, so they share one server and none of them shuts it down when it exits (each would
    otherwise own, and stop, the same one)."""
    if settings.redis_url or (workers <= 1 and not worker_child):
        yield
        return
    from agtos.storage.redis_conn import EmbeddedRedis

    server = EmbeddedRedis(settings.data_dir / "redis", settings.embedded_redis_fsync)
    os.environ["REDIS_URL"] = f"unix://{server.socket_path}"
    try:
        yield
    finally:
        os.environ.pop("REDIS_URL", None)
        server.stop()


@contextmanager
def serve_ingest_env(mode: IngestModeOption | None, layout: WorkerLayout) -> Iterator[bool]:
    """The server's ingestion set-up for the duration of ``uvicorn.run`` (its worker processes inherit
    it): queue mode unless AGTOS_INGEST_MODE or ``--ingest-mode`` says otherwise; in queue mode the
    API processes run a worker thread only in the ``thread`` layout. Yields whether ``agtos serve``
    runs its worker child (queue mode, ``process`` layout)."""
    chosen = mode.value if mode else (os.environ.get("AGTOS_INGEST_MODE") or "").strip() or "queue"  # blank: unset
    queue = chosen.strip().lower() == "queue"
    changes = {"AGTOS_INGEST_MODE": chosen}
    if queue:
        changes["AGTOS_INGEST_WORKER"] = "true" if layout is WorkerLayout.thread else "false"
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield queue and layout is WorkerLayout.process
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def register(app: typer.Typer) -> None:
    @app.command()
    def worker(
        once: bool = typer.Option(False, "--once", help="handle the jobs queued now, then exit"),
        idle_priority: bool = typer.Option(
            False, "--idle-priority", help="take CPU only when nothing else wants it (SCHED_IDLE, else nice 19)"
        ),
        parent: int = typer.Option(None, "--parent", help="stop when process PARENT exits (agtos serve's child)"),
    ) -> None:
        """Run the ingestion worker: ended sessions from the durable queue become searchable episodes.

        Uses REDIS_URL; without it, the embedded Redis of an ``agtos serve`` on the same data
        directory (which must be running: a worker never starts, or stops, the embedded server)."""
        import logging

        from agtos.memory.coordinator import MemoryCoordinator

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if idle_priority:  # first: every thread started later (the models' included) inherits it
            logging.getLogger("agtos.worker").info("CPU priority: %s", lowest_cpu_priority())
        stop = threading.Event()
        if parent is not None:
            exit_with_parent(parent, stop)
        settings = Settings.from_env()
        if not settings.redis_url:
            url = running_embedded_redis(settings)
            if url is None:
                typer.echo(
                    f"no Redis: set REDIS_URL, or start `agtos serve` first (its embedded Redis under "
                    f"{settings.data_dir / 'redis'} is shared with the worker)",
                    err=True,
                )
                raise typer.Exit(2)
            settings = settings.with_overrides(redis_url=url)
        coordinator = MemoryCoordinator(settings)
        try:
            ingest = coordinator.ingest_worker()
            if once:
                typer.echo(f"handled {ingest.drain()} job(s)")
                return
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            coordinator.services.warm_models()  # before its first heartbeat: not alive while loading
            ingest.run_forever(stop)
        finally:
            coordinator.close()
