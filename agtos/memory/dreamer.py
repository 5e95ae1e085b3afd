"""When the Dreamer runs: once per ended session, deferred by the ResourceGuard for LLM work.

It listens to ``sessionEnded`` on the services' event bus, the one path that triggers it: every
way a session ends (the API, imports, an idle sweep, another component emitting the event)
emits that event, and a Redis marker makes sure each ended session is consolidated once. The user is
marked "dream pending" with the session's episode, in the same atomic write
(:func:`agtos.memory.ingestion_pipeline.dreaming_steps`; an event whose emitter stored nothing so marks it
here), and the run that succeeds clears the mark it read before it read the episodes; a run the guard put
off until it gave up, one that failed (a lock waited for past ``AGTOS_LOCK_WAIT_MAX_S``, Redis gone, an
error), one that never started (Redis away when the event came, the process killed after the store) or one
cut short by the process's exit leaves it, and the user's next maintenance sweep
(:func:`agtos.memory.dream_retry.retry_pending_dream`) runs the Dreamer again.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agtos.memory.dreamer_pipeline import DreamReport, run_dreamer
from agtos.memory.resource_guard import run_when_safe
from agtos.storage.redis_conn import StorageUnavailable
from agtos.storage.user_lock import LockBusy

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
            # marked consolidated: a later event of the same ingestion batch is this user's, and its
            # run reads the user's recent episodes, this one included (ingest_worker.ingest_sessions)
            later = bool(payload.get("more_for_user"))
            token = "" if later else self._pending_token(user_id)
        except StorageUnavailable:
            log.warning("Dreamer skipped for %s/%s: Redis unavailable", user_id, session_id)
            return
        if later:
            privacy.late_writes_removed(since)
            return
        if self.services.consolidation_llm is None:
            self._run(user_id, since, token, lambda: run_dreamer(self.services, user_id))  # rules: cheap, run now
            return
        work = functools.partial(self._when_safe, user_id)
        thread = threading.Thread(
            target=self._run, args=(user_id, since, token, work), name=f"dreamer-{user_id}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _pending_token(self, user_id: str) -> str:
        """The user's pending mark, read before the run reads the episodes: the run that succeeds clears it
        (every episode marked by then is stored, so read). None (a run that read the episode cleared it, or
        the emitter stored nothing): marked now, one extra run at most."""
        markers = self.services.dream_markers
        return markers.pending(user_id) or markers.mark_pending(user_id)

    def _run(self, user_id: str, since: dict[str, int], token: str, work: Callable[[], DreamReport | None]) -> None:
        """``work`` (None: it gave up); the user's pending mark ``token`` cleared if it ran, else left for the
        maintenance sweep. A failure is logged, never raised to the event's emitter (its episode is stored)."""
        try:
            report = work()
            if report is not None:
                self.last_report = report
                self.services.dream_markers.clear_pending(user_id, token)
        except Exception as exc:
            expected = isinstance(exc, LockBusy | StorageUnavailable)
            log.warning(
                "Dreamer for %s failed (%s: %s); left pending for the maintenance sweep",
                user_id,
                type(exc).__name__,
                exc,
                exc_info=not expected,
            )
        finally:
            self.services.privacy.late_writes_removed(since)

    def _when_safe(self, user_id: str) -> DreamReport | None:
        """LLM consolidation waits for the guard: retried with back-off, then given up (None)."""
        outcome = run_when_safe(
            self.services.guard,
            lambda: run_dreamer(self.services, user_id),
            retries=self.retries,
            delay_s=self.delay_s,
            sleep=self.sleep,
            slot=self.services.settings.llm_slot("consolidation"),
        )
        if not outcome.ran:
            log.warning(
                "Dreamer for %s gave up after deferrals: %s; left pending for the maintenance sweep",
                user_id,
                outcome.reasons,
            )
        return outcome.result if outcome.ran else None

    def wait(self, timeout_s: float = 30.0) -> bool:
        """Join background runs (tests, shutdown); True when all finished."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
        return not self._threads
