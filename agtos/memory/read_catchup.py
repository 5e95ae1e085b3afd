"""A quiet user's read stores their own queued session ends first (queue mode; issue 14).

The queue worker of ``agtos serve`` runs at idle priority: while other clients keep the CPU busy it
stores nothing, and a user who ended a session would not find it in the next search or context. So a
read (search, context, ask) of user U first has U's own queued ends ingested, when U is
*quiet*: no live session of U (the session journal's per-user set) and U's newest queued end at least
``AGTOS_READ_CATCHUP_AFTER_S`` old. A user still talking (a live session, an end just made) leaves the
work to the worker: the mixed load's reads cost one Redis round trip more, nothing else.

The catch-up runs on a thread of its own, one ingestion run after another (the worker's run planning:
``RUN_MAX_CHARS`` of turn text each) until the user has no queued end left, through the worker's own
path (:func:`agtos.memory.ingest_worker.ingest_sessions`: the events, the forget-all fences, the
opt-out), and acknowledges the entries as the worker does (``XACK``, a no-op for an entry never
delivered, + ``XDEL``): the worker never reads them. The read waits for it :data:`READ_WAIT_S` at most
(the read's own work on a busy box adds 1-2 s, and common HTTP clients time out at 5 s; on two busy
cores 20 sessions take 10-20 s to store), then answers from what is stored by then while the catch-up
goes on; a later read of the user in this process waits on the same catch-up, not a new one. One
catch-up per user at a time across processes (each run under a lock taken without waiting: a read
elsewhere answers from what is stored). A failure never fails the read and never loses a job: an entry is
acknowledged only once ingested.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from agtos.memory.ingest_worker import SessionJob, entry_job, job_runs
from agtos.storage.ingest_queue import IngestQueue, QueueEntry
from agtos.storage.queued_ends import QueuedEnds
from agtos.storage.user_lock import try_held, waiting_at_most

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)

#: the per-user lock of a catch-up (taken without waiting); expires if its holder dies
LOCK_MS = 60_000
#: how long the ingestion's first user lock is waited for (a worker or another writer holding it): then
#: the catch-up gives up, the entries stay queued, and the read answers from what is stored
FIRST_LOCK_WAIT_S = 1.0
#: how long a read waits for its user's catch-up before it answers from what is stored (the catch-up goes on)
READ_WAIT_S = 2.5


class ReadCatchUp:
    """Stores a quiet user's queued ends before their read (see the module)."""

    def __init__(
        self, services: Services, queue: IngestQueue, handle_many: Callable[[list[SessionJob]], object]
    ) -> None:
        self.services, self.settings = services, services.settings
        self.queue = queue
        self.ends = QueuedEnds(services.connector, services.keys, services.settings.session_journal_ttl_seconds)
        self.handle_many = handle_many
        self._guard = threading.Lock()
        self._running: dict[str, threading.Event] = {}  # user -> set when their catch-up thread is done

    def before_read(self, user_id: str) -> bool:
        """Catch up if due, waiting :data:`READ_WAIT_S` at most; True when no catch-up of the user is still
        running here. Never raises (a warning is logged)."""
        after_s = self.settings.read_catchup_after_s
        if self.settings.ingest_mode != "queue" or after_s is None:
            return True
        try:
            if not self._due(user_id, after_s):
                return True
        except Exception as exc:  # the read answers from what is stored; the jobs stay queued
            log.warning("read catch-up of user %s failed: %s", user_id, exc)
            return True
        with self._guard:
            done = self._running.get(user_id)
            if done is None:
                done = self._running[user_id] = threading.Event()
                threading.Thread(target=self._drain, args=(user_id, done), name="read-catchup", daemon=True).start()
        return done.wait(READ_WAIT_S)

    def _drain(self, user_id: str, done: threading.Event) -> None:
        """The catch-up's thread: one run after another until none is left (or another holds the lock)."""
        try:
            while self._catch_up(user_id):
                pass
        except Exception as exc:  # the jobs stay queued for the worker or the next read
            log.warning("read catch-up of user %s failed: %s", user_id, exc)
        finally:
            with self._guard:
                self._running.pop(user_id, None)
            done.set()

    def _due(self, user_id: str, after_s: float) -> bool:
        state = self.ends.state(user_id)
        if not state.queued or state.live_sessions or state.newest_ms is None:
            return False
        return time.time() * 1000 - state.newest_ms >= after_s * 1000

    def _catch_up(self, user_id: str) -> int:
        lock = self.services.keys.user(user_id).record("read-catchup", "lock")
        with try_held(self.services.connector, lock, LOCK_MS) as token:
            if token is None:  # another read of this user is catching up: answer as it stands
                return 0
            picked = self._first_run(user_id)
            if not picked:
                return 0
            started = time.monotonic()
            # a worker holding one of these in its pending list (delivered, not done: a starved worker's)
            # ingests it again: a job is idempotent (episode id from user, session and turns; every write an
            # upsert; the user's writer locks serialise the merges), so that stores it once, and the queue
            # counts it done once (whichever ack deletes the entry)
            with waiting_at_most(FIRST_LOCK_WAIT_S):
                self.handle_many([job for _, job in picked])
            share = (time.monotonic() - started) / len(picked)
            for entry, _ in picked:
                self.queue.ack(entry.id, share, caught_up=True)
            self.ends.remove(user_id, [entry.id for entry, _ in picked])
            log.info("read catch-up of user %s stored %d queued ends", user_id, len(picked))
            return len(picked)

    def _first_run(self, user_id: str) -> list[tuple[QueueEntry, SessionJob]]:
        """The user's queued ends still in the stream, as the worker reads them, the first run of them
        (:func:`job_runs`); ids no longer in the stream are dropped from the user's set."""
        ids = self.ends.oldest(user_id)
        found = self.queue.entries(ids)
        self.ends.remove(user_id, [i for i in ids if i not in found])
        jobs: list[tuple[QueueEntry, SessionJob]] = []
        for entry_id in ids:
            if entry_id not in found:
                continue
            try:
                job = entry_job(found[entry_id])
            except ValidationError:  # left to the worker, which dead-letters it
                continue
            if job.user_id == user_id:
                jobs.append((found[entry_id], job))
        if not jobs:
            return []
        return [jobs[at] for at in job_runs([job for _, job in jobs])[0]]
