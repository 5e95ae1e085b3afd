"""Lint sweeps requested over HTTP run off the request.

``POST /api/memory/maintain`` stores a queued :class:`MaintenanceRun` and returns at once; a
one-thread executor owned by the app then sweeps (inline steps), or, when a Prefect API is
configured, submits the ``memory-lint/nightly-lint`` deployment with the run's id and lets
the worker sweep. Either way the run's record (queued, running, completed/deferred/failed)
is in Redis. Prefect is imported on that thread only, never by a request.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas.api import MaintenanceRun
from agtos.schemas.records import new_id
from agtos.tasks.url_credentials import mask_logged_urls, mask_urls

log = logging.getLogger(__name__)
mask_logged_urls("httpx")  # Prefect's client logs each request's URL, PREFECT_API_URL's credentials included, at INFO

LINT_DEPLOYMENT = "memory-lint/nightly-lint"


def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="maintenance-run")


class MaintenanceRunner:
    """Queues runs (one queued run per user: a second request returns it) and sweeps them in turn."""

    def __init__(self, coordinator: MemoryCoordinator) -> None:
        self.coordinator = coordinator
        self._pool = _pool()
        self._queued: dict[str, MaintenanceRun] = {}
        self._handed: dict[str, str] = {}  # user -> the run last handed on (to the thread or to Prefect)
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # set by drain: a run the guard defers stops waiting

    def submit(self, user_id: str) -> MaintenanceRun:
        """Record a queued run for ``user_id`` and hand it to the worker thread; while the user's last run
        is still queued (waiting for the thread, taken but not started, or held by Prefect until a worker
        runs it), that run. A run whose record is gone (the user forgot everything, or opted out and forgot,
        since it was queued) is not handed out again: its ``Location`` would answer 404."""
        with self._lock:
            waiting, handed = self._queued.get(user_id), self._handed.get(user_id)
        last = handed if waiting is None else waiting.run_id
        if last is not None:
            stored = self.coordinator.maintenance.get_run(user_id, last)
            if stored is not None and stored.status == "queued":
                return stored
        with self._lock:
            waiting = self._queued.get(user_id)
            if waiting is not None and waiting.run_id != last:  # queued by another request meanwhile
                return waiting
            run = MaintenanceRun(run_id=new_id("run"), user_id=user_id)
            self.coordinator.maintenance.save_run(run)
            self._queued[user_id] = run
            self._handed[user_id] = run.run_id
            self._pool.submit(self._execute, run, self._stopping)
        return run

    def get(self, user_id: str, run_id: str) -> MaintenanceRun | None:
        return self.coordinator.maintenance.get_run(user_id, run_id)

    def drain(self) -> None:
        """Finish the runs already accepted (their records would otherwise stay queued) without
        waiting out the ResourceGuard: a run it defers checks again at once and is recorded
        ``deferred`` with its reasons (not minutes of shutdown). Later requests get a fresh thread
        (an app's lifespan may start again, as in tests)."""
        with self._lock:
            pool, self._pool = self._pool, _pool()
            stopping, self._stopping = self._stopping, threading.Event()
        stopping.set()
        pool.shutdown(wait=True)

    def _execute(self, run: MaintenanceRun, stopping: threading.Event) -> None:
        with self._lock:
            if self._queued.get(run.user_id) is run:
                del self._queued[run.user_id]

        def pause(seconds: float) -> None:  # the guard's wait, cut short by drain
            stopping.wait(seconds)

        submitted = False
        try:
            stored, since_ms = self.coordinator.queued_run(run.user_id, run.run_id)
            if stored is None:
                # forgotten since it was queued (forget-all, opt-out): not run, and no record written again
                log.info("maintenance run %s of %s dropped: the user forgot everything since", run.run_id, run.user_id)
                return
            submitted = self._submitted_to_prefect(run)
            if not submitted:  # a forget-all after the read above (Prefect's import included) undoes its writes
                self.coordinator.maintain_run(run, pause, since_ms)
        except Exception:
            log.exception("maintenance run %s of %s failed", run.run_id, run.user_id)
        finally:
            if not submitted:  # over here (a record left queued by a failure is not handed out again)
                with self._lock:
                    if self._handed.get(run.user_id) == run.run_id:
                        del self._handed[run.user_id]

    def _submitted_to_prefect(self, run: MaintenanceRun) -> bool:
        """True when the deployment took the run; False without a Prefect API or when it refused."""
        from prefect.settings import get_current_settings

        if not get_current_settings().api.url:
            return False
        from prefect.deployments import run_deployment

        try:
            run_deployment(
                LINT_DEPLOYMENT,
                parameters={"user_id": run.user_id, "run_id": run.run_id},
                timeout=0,
                idempotency_key=run.run_id,
            )
        except Exception as exc:  # its message names PREFECT_API_URL: credentials masked, no traceback
            reason = mask_urls("; ".join(f"{type(e).__name__}: {e}" for e in (exc, exc.__cause__) if e is not None))
            log.warning("Prefect did not take %s (%s): %s; sweeping here", run.run_id, LINT_DEPLOYMENT, reason)
            return False
        return True
