"""When the Dreamer runs: once per ended session, deferred by the ResourceGuard for LLM work.

It listens to ``sessionEnded`` on the services' event bus, the one path that triggers it: every
way a session ends (the API, imports, an idle sweep, another component emitting the event)
emits that event, and a Redis marker makes sure each ended session is consolidated once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agtos.memory.dreamer_pipeline import DreamReport, run_dreamer
from agtos.memory.resource_guard import run_when_safe
from agtos.storage.redis_conn import StorageUnavailable

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)


class DreamerScheduler:
    def __init__(
        self,
        services: Services,
        retries: int = 5,
        delay_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.services = services
        self.retries = retries
        self.delay_s = delay_s
        self.sleep = sleep
        self.last_report: DreamReport | None = None
        self._threads: list[threading.Thread] = []

    def on_session_ended(self, payload: dict[str, Any]) -> None:
        user_id, session_id = str(payload["user_id"]), str(payload["session_id"])
        privacy = self.services.privacy
        try:
            since = {user_id: privacy.clock_ms()}  # what is written from now on goes if they forget meanwhile
            # a session id continued after its end gives a new episode, dreamed again
            if not self.services.dream_markers.claim(user_id, str(payload.get("episode_id") or session_id)):
                return
        except StorageUnavailable:
            log.warning("Dreamer skipped for %s/%s: Redis unavailable", user_id, session_id)
            return
        if payload.get("more_for_user"):
            # marked consolidated: a later event of the same ingestion batch is this user's, and its
            # run reads the user's recent episodes, this one included (ingest_worker.ingest_sessions)
            privacy.late_writes_removed(since)
            return
        if self.services.consolidation_llm is None:
            self.last_report = run_dreamer(self.services, user_id)  # rules: cheap, run now
            privacy.late_writes_removed(since)
            return
        thread = threading.Thread(target=self._guarded, args=(user_id, since), name=f"dreamer-{user_id}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _guarded(self, user_id: str, since: dict[str, int]) -> None:
        """LLM consolidation waits for the guard: retried with back-off, then given up."""
        outcome = run_when_safe(
            self.services.guard,
            lambda: run_dreamer(self.services, user_id),
            retries=self.retries,
            delay_s=self.delay_s,
            sleep=self.sleep,
            slot=self.services.settings.llm_slot("consolidation"),
        )
        self.services.privacy.late_writes_removed(since)
        if outcome.ran:
            self.last_report = outcome.result
        else:
            log.warning("Dreamer for %s gave up after deferrals: %s", user_id, outcome.reasons)

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Join background runs (tests, shutdown); True when all finished."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
        return not self._threads
