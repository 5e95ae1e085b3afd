"""``agtos worker``: the ingestion worker as its own process, and the ingestion settings of ``agtos serve``."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

import typer

from agtos.config import Settings


class IngestModeOption(StrEnum):
    inline = "inline"
    queue = "queue"


@contextmanager
def serve_ingest_env(mode: IngestModeOption | None, worker: bool | None) -> Iterator[None]:
    """The server's ingestion set-up for the duration of ``uvicorn.run`` (its worker processes inherit
    it): queue mode unless AGTOS_INGEST_MODE or ``--ingest-mode`` says otherwise; ``--no-worker``
    leaves the queue to separate ``agtos worker`` processes."""
    changes = {"AGTOS_INGEST_MODE": mode.value if mode else os.environ.get("AGTOS_INGEST_MODE") or "queue"}
    if worker is not None:
        changes["AGTOS_INGEST_WORKER"] = "true" if worker else "false"
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
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
    ) -> None:
        """Run the ingestion worker: ended sessions from the durable queue become searchable episodes."""
        import logging

        from agtos.memory.coordinator import MemoryCoordinator

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        coordinator = MemoryCoordinator(Settings.from_env())
        try:
            ingest = coordinator.ingest_worker()
            if once:
                typer.echo(f"handled {ingest.drain()} job(s)")
                return
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            ingest.run_forever(stop)
        finally:
            coordinator.close()
