"""Live sessions of one process: turns journalled in Redis before working memory takes them, a
session's view replayed from its journal, and its end: an episode stored now (inline mode) or a
durable queue job for a worker (queue mode), idle sessions ended by the sweeper."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from agtos.memory.episodic import segment_key
from agtos.memory.health_checks import ingest_queue_check
from agtos.memory.ingest_worker import (
    IngestWorker,
    SessionJob,
    forgotten_draft,
    ingest_session,
    ingest_sessions,
    job_runs,
)
from agtos.memory.ingestion_pipeline import FORGOTTEN_WHILE_STORED
from agtos.memory.read_catchup import ReadCatchUp
from agtos.memory.services import Services
from agtos.memory.session_ends import LastEnd, SessionEnds
from agtos.memory.working import WorkingMemory
from agtos.schemas import Episode, Turn
from agtos.schemas.records import now_ms
from agtos.storage.ingest_queue import IngestQueue, entry_ms
from agtos.storage.keys import InvalidIdentifier, check_record_id, check_user_id
from agtos.storage.redis_conn import StorageUnavailable
from agtos.storage.session_end_lock import SessionEndLock
from agtos.storage.session_journal import IdempotencyConflict, JournalFull, JournalRead
from agtos.tasks.extract import extract
from agtos.tasks.importance import decide_save

log = logging.getLogger(__name__)

SESSION_ENDED = "sessionEnded"


@dataclass(frozen=True)
class SessionEndResult:
    session_id: str
    saved: bool
    reason: str
    episode: Episode | None
    episode_id: str | None = None
    status: str = "done"  # done | queued | skipped
    turns_accepted: int = 0
    queue_position: int | None = None
    searchable_in_s: float | None = None
    #: an end that found no turns: the session's last end that took some (a retried end learns its episode)
    last_end: LastEnd | None = None


class LoneRequest(Protocol):
    """The API process as a session end without ``wait`` sees it (the API's
    :class:`agtos.serving.inflight.InflightCounter`)."""

    def alone(self) -> bool:
        """Whether no other request is in flight in this process."""
        ...

    def set_aside(self) -> AbstractContextManager[None]:
        """Out of the requests in flight that the process's worker thread yields to, while it waits."""
        ...


def dated_like_their_neighbours(turns: list[Turn]) -> list[Turn]:
    """A turn sent without a time among dated ones (a past conversation replayed with one time
    missing) takes the previous dated turn's time and UTC offset, or the next one's when none
    precedes it, instead of "now" (which would date its episode and facts today). Turns of a batch
    where none is dated keep their arrival time (a live chat)."""
    dated = [i for i, t in enumerate(turns) if "timestamp" in t.model_fields_set]
    if not dated or len(dated) == len(turns):
        return turns
    out, last = [], turns[dated[0]]
    for turn in turns:
        if "timestamp" in turn.model_fields_set:
            last = turn
            out.append(turn)
        else:
            out.append(turn.model_copy(update={"timestamp": last.timestamp, "utc_offset": last.utc_offset}))
    return out


class LiveSessions:
    """The session lifecycle over the services of one process (the coordinator's session methods)."""

    def __init__(self, services: Services) -> None:
        self.services = s = services
        self.settings, self.keys, self.connector, self.events = s.settings, s.keys, s.connector, s.events
        self.working, self.episodes, self.activity, self.privacy = s.working, s.episodes, s.activity, s.privacy
        # session-end ingestion in queue mode: the durable queue and this process's worker (if any)
        self.ingest_queue = IngestQueue(s.connector, s.keys)
        self.worker: IngestWorker | None = None
        self.end_lock = SessionEndLock(s.connector, s.keys)  # one end of a session at a time
        # what each session's last end did, for an end that finds no turns (a retry after a lost answer)
        self.ends = SessionEnds(s.connector, s.keys, s.settings.session_journal_ttl_seconds)
        # a quiet user's read stores their queued ends itself, listed per user as they are queued
        self.read_catchup = ReadCatchUp(s, self.ingest_queue, self.ingest_jobs)
        self.queued_ends = self.read_catchup.ends

    def add_turn(self, user_id: str, session_id: str, turn: Turn) -> WorkingMemory:
        """Append one turn (see :meth:`add_turns`)."""
        return self.add_turns(user_id, session_id, [turn])

    def add_turns(
        self, user_id: str, session_id: str, turns: list[Turn], idempotency_key: str | None = None
    ) -> WorkingMemory:
        """Journal the turns in Redis, all or none, and only then add them to working memory: a
        returned append is durable. ``StorageUnavailable`` (Redis down) and ``JournalFull`` (a cap
        passed) leave nothing written (a timeout may have: a retry with the same ``idempotency_key``
        is then not appended again). An opted-out user's turns stay in working memory only."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        turns = dated_like_their_neighbours(turns)
        wm = self.working.get_or_create(user_id, session_id)
        with wm.lock:
            if self.privacy.is_opted_out(user_id):
                if self._forgotten_elsewhere(user_id, wm):
                    wm.reset()
                if not wm.messages:
                    wm.began_ms = self._clock_ms()
                for turn in turns:
                    wm.add(turn)
            else:
                self._journal(user_id, session_id, wm, turns, idempotency_key)
        self.activity.turn(user_id, session_id)
        return wm

    def session(self, user_id: str, session_id: str) -> WorkingMemory | None:
        """The live session as its Redis journal has it: replayed when this process does not hold
        it (after a restart, an LRU eviction, or on another API worker), brought up to date when
        another worker appended, None once it was ended elsewhere. This process's view while Redis
        is down; None when there is no session."""
        check_record_id(session_id, "session id")
        wm = self.working.get(check_user_id(user_id), session_id)
        if self.privacy.is_opted_out(user_id) and (wm is None or not wm.journal_len):
            if wm is not None and self._forgotten_elsewhere(user_id, wm):
                self.working.discard(user_id, session_id, wm)
                return None
            return wm
        try:
            length = self.services.journal.length(user_id, session_id)
        except StorageUnavailable:
            return wm
        if wm is None:
            if not length:
                return None
            wm = self.working.get_or_create(user_id, session_id)
        with wm.lock:
            if not length and (wm.journal_len or not wm.messages):  # ended (or expired) elsewhere
                self.working.discard(user_id, session_id, wm)
                return None
            if length < wm.journal_len:  # ended elsewhere, and continued since
                wm.reset()
            if length > wm.journal_len:
                self._journal_catch_up(wm, self.services.journal.turns(user_id, session_id, wm.journal_len))
        return wm

    def _clock_ms(self) -> int:
        """The Redis clock (forget-all marks are on it); this host's while Redis is down."""
        try:
            return self.privacy.clock_ms()
        except StorageUnavailable:
            return now_ms()

    def _forgotten_elsewhere(self, user_id: str, wm: WorkingMemory) -> bool:
        """Whether the user forgot everything since ``wm`` (held in this process only, never journalled)
        began: a forget-all sent through another API process clears its working memory, not this one's."""
        if wm.journal_len or not wm.messages:
            return False
        try:
            mark = self.privacy.forget_marks([user_id]).get(user_id)
        except StorageUnavailable:
            return False
        return mark is not None and mark >= wm.began_ms

    def _journal(
        self, user_id: str, session_id: str, wm: WorkingMemory, turns: list[Turn], idempotency_key: str | None
    ) -> None:
        """Append to the journal (the caller holds ``wm.lock``), then to ``wm``, with any turns
        other processes journalled first; on failure ``wm`` is left as it was."""
        try:
            appended = self.services.journal.append(
                user_id, session_id, turns, seen=wm.journal_len, idempotency_key=idempotency_key
            )
        except (StorageUnavailable, JournalFull, IdempotencyConflict):
            if not wm.messages:  # created for this append: not a live session
                self.working.discard(user_id, session_id, wm)
            raise
        if appended.reset:
            wm.reset()
        self._journal_catch_up(wm, appended.unseen if appended.replayed else [*appended.unseen, *turns])

    @staticmethod
    def _journal_catch_up(wm: WorkingMemory, turns: list[Turn]) -> None:
        for turn in turns:
            wm.add(turn)
        wm.journal_len += len(turns)

    def _session_turns(self, user_id: str, session_id: str) -> tuple[list[Turn], JournalRead]:
        """What ending the session ingests: its journal, and the read that the clear afterwards removes
        (only that: turns appended meanwhile stay for the next end). ``StorageUnavailable`` when Redis
        cannot be read (never "no turns": the session stays live, for a retry or the idle sweeper).

        An empty journal falls back to this process's copy only when that copy was never journalled
        (turns kept while the user had opted out). A copy that was journalled and whose journal is
        gone is stale: the session was ended elsewhere (another API process or its sweeper) or the
        user forgot everything there, so it is dropped, not stored (again). A journal that merely
        expired is the same case: its TTL (48 h) is far past the idle sweep (30 min)."""
        read = self.services.journal.read(user_id, session_id)
        if read.turns:
            return read.turns, read
        wm = self.working.get(user_id, session_id)
        if wm is None:
            return [], read
        with wm.lock:
            if wm.journal_len:
                self.working.discard(user_id, session_id, wm)
                return [], read
            return list(wm.messages), read  # read.count 0: the clear removes no journalled turn

    def end_session(
        self, user_id: str, session_id: str, wait_s: float = 0.0, lone: LoneRequest | None = None
    ) -> SessionEndResult:
        """End the session: its turns become an episode if the save heuristics keep it (idempotent).

        Inline mode stores the episode now. Queue mode (AGTOS_INGEST_MODE=queue) only takes the
        turns into a durable queue job and returns ``queued``; a worker stores the episode. With
        ``wait_s`` it waits up to that long for the worker and answers ``done`` if it finished.
        With ``lone`` (an HTTP end without ``wait``) and ``wait_s`` 0 it waits the same way, up to
        AGTOS_END_IDLE_WAIT_S, only while ``lone`` is the only request in flight and a worker is
        alive (:meth:`_wait_while_alone`): a lone client reads what it wrote."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        if self.privacy.is_opted_out(user_id):
            # turns journalled before the opt-out end with the session too: nothing of it is kept, so opting in
            # again does not bring it back live, nor have a later end or the idle sweeper store it
            journalled = self.services.journal.length(user_id, session_id)
            had_turns = journalled > 0 or self.working.get(user_id, session_id) is not None
            if journalled:
                self.services.journal.clear(user_id, session_id)
            self.working.drop(user_id, session_id)
            self.activity.session_ended(user_id, session_id)
            reason = "user opted out of persistence" if had_turns else "session has no turns"
            return SessionEndResult(session_id, False, reason, None, status="skipped")
        # Redis down while reading, queueing, storing or clearing: StorageUnavailable (503) and the
        # session stays live (activity included), so a retry or the idle sweeper ends it later; a
        # repeat of a half-done end stores the same episode (ids from the turns, upserts). Turns
        # appended while this end runs stay journalled: a later end stores them as their own segment.
        # Another end of the session waits for this one's read-store-clear (else both store its turns)
        with self.end_lock.held(user_id, session_id):
            turns, read = self._session_turns(user_id, session_id)
            if not turns:
                self.activity.session_ended(user_id, session_id)
                last = self.last_end(user_id, session_id)  # a retry after a lost answer learns where they went
                reason = "session has no turns"
                return SessionEndResult(session_id, False, reason, None, status="skipped", last_end=last)
            job = SessionJob(user_id=user_id, session_id=session_id, segment=segment_key(turns), turns=turns)
            if self.settings.ingest_mode == "queue":
                queued = self._enqueue_session(job, read)
            else:
                draft = ingest_session(self.services, job, self._emit_session_ended)
                kept = draft.episode.id if draft.decision.save else None
                # forgotten while stored, or since (the record is written only while the episode is): no
                # record of this end, so a retry answers as for a session that never took turns
                forgotten = draft.decision.reason == FORGOTTEN_WHILE_STORED
                if forgotten or not self.ends.record(user_id, session_id, kept, draft.decision.reason, len(turns)):
                    draft = forgotten_draft(draft)
                self._clear_session(user_id, session_id, read)
                if not draft.decision.save:
                    return SessionEndResult(session_id, False, draft.decision.reason, None, status="skipped")
                return SessionEndResult(
                    session_id, True, draft.decision.reason, draft.episode, draft.episode.id, "done", len(turns)
                )
        result, entry_id = queued
        return result if entry_id is None else self._await_job(job, result, entry_id, wait_s, lone)

    def last_end(self, user_id: str, session_id: str) -> LastEnd | None:
        """The session's last end that took turns (within AGTOS_SESSION_JOURNAL_TTL_HOURS), its episode as it is
        now: ``done`` once stored, ``queued`` while its job is, ``gone`` when neither (expired, or dropped by an
        opt-out; forgetting the episode deletes the record), ``skipped`` when it kept nothing. None when
        unknown or Redis cannot say."""
        try:
            recorded = self.ends.recorded(user_id, session_id)
            if recorded is None:
                return None
            end, episode_id = recorded.end, recorded.end.episode_id
            if episode_id is None:  # skipped: nothing to look up
                return end
            if self.episodes.existing_ids(user_id, [episode_id]):
                return dataclasses.replace(end, status="done")
            queued = recorded.entry_id is not None and self.ingest_queue.contains(recorded.entry_id)
            return dataclasses.replace(end, status="queued" if queued else "gone")
        except StorageUnavailable:
            return None

    def _enqueue_session(self, job: SessionJob, read: JournalRead) -> tuple[SessionEndResult, str | None]:
        """Queue mode: decide (pure; the verdict only: the items found, not their wording nor the
        importance, which the worker works out), queue the job, clear what it read; the worker ingests.
        The result, and the queue entry (None when the session is not kept)."""
        decision = decide_save(job.turns, extract(job.turns, worded=False), scored=False)
        if not decision.save:
            self.ends.record(job.user_id, job.session_id, None, decision.reason, len(job.turns))
            self._clear_session(job.user_id, job.session_id, read)
            return SessionEndResult(job.session_id, False, decision.reason, None, status="skipped"), None
        entry_id, position = self.ingest_queue.enqueue(job.model_dump_json().encode())
        # after the entry (another slot on a Cluster): a crash between them leaves a job the worker finds
        self.queued_ends.add(job.user_id, entry_id, entry_ms(entry_id))
        self.ends.record(job.user_id, job.session_id, job.episode_id, decision.reason, len(job.turns), entry_id)
        # the queue entry holds the turns now; a crash before this line leaves the journal for a retry
        self._clear_session(job.user_id, job.session_id, read)
        result = SessionEndResult(
            job.session_id, True, decision.reason, None, job.episode_id, "queued", len(job.turns), position
        )
        return result, entry_id

    def _await_job(
        self, job: SessionJob, result: SessionEndResult, entry_id: str, wait_s: float, lone: LoneRequest | None
    ) -> SessionEndResult:
        """A queued end: ``done`` with the stored episode if the worker finishes within ``wait_s`` (or
        while ``lone`` is alone), else ``queued`` with an estimate of when it is searchable."""
        done = self._wait_for_job(entry_id, wait_s) if wait_s > 0 else self._wait_while_alone(entry_id, lone)
        if done:
            stored = self.episodes.get(job.user_id, job.episode_id)
            if stored is not None:
                return dataclasses.replace(result, episode=stored, status="done", queue_position=None)
        return dataclasses.replace(result, searchable_in_s=self._estimate_wait(result.queue_position or 0))

    def _wait_while_alone(self, entry_id: str, lone: LoneRequest | None) -> bool:
        """An HTTP end without ``wait``: True once its job is gone (as :meth:`_wait_for_job`), waiting
        up to AGTOS_END_IDLE_WAIT_S only while it is the only request in flight in this API process
        (a lone client: it reads its own write next) and a worker is alive (else no one would store
        it: False at once). Under concurrent requests, or once one arrives, False: the end answers
        ``queued`` and takes no thread from the reads. While it waits the end is set aside from the
        requests in flight, so a worker thread of this process does not yield to it."""
        limit = self.settings.end_idle_wait_s
        if lone is None or limit <= 0 or not lone.alone() or not self._worker_alive():
            return False
        with lone.set_aside():
            return self._wait_for_job(entry_id, limit, lone.alone)

    def _worker_alive(self) -> bool:
        """Whether a worker's heartbeat is recent (the queue stats' ``workersAlive``)."""
        try:
            return bool(self.ingest_queue.stats()["workersAlive"])
        except StorageUnavailable:
            return False

    def _wait_for_job(self, entry_id: str, wait_s: float, still: Callable[[], bool] | None = None) -> bool:
        """True once the queue entry is gone (done, or dead-lettered) within ``wait_s`` (and while
        ``still()``, when given)."""
        deadline = time.monotonic() + wait_s
        try:
            while self.ingest_queue.contains(entry_id):
                if time.monotonic() >= deadline or (still is not None and not still()):
                    return False
                time.sleep(0.05)
        except StorageUnavailable:  # the job is queued and the session cleared: answer queued, not 503
            return False
        return True

    def _estimate_wait(self, position: int) -> float | None:
        """Seconds until a job at ``position`` is done: position x mean job time / live workers."""
        try:
            stats = self.ingest_queue.stats()
        except StorageUnavailable:
            return None
        if not stats["workersAlive"]:
            return None
        return round(position * (stats["meanJobS"] or 1.0) / stats["workersAlive"], 1)

    def _emit_session_ended(self, payload: dict[str, Any]) -> None:
        self.events.emit(SESSION_ENDED, payload)

    def ingest_job(self, job: SessionJob) -> None:
        """What the ingestion worker runs for one queued session end."""
        ingest_session(self.services, job, self._emit_session_ended)

    def ingest_jobs(self, jobs: list[SessionJob]) -> None:
        """What the ingestion worker runs for several queued session ends read at once."""
        ingest_sessions(self.services, jobs, self._emit_session_ended)

    def ingest_worker(self) -> IngestWorker:
        """A worker over this process's services (``agtos worker``, or the API's thread)."""
        s = self.settings
        return IngestWorker(
            self.ingest_queue,
            self.ingest_job,
            handle_many=self.ingest_jobs,
            plan=job_runs,
            max_attempts=s.ingest_max_attempts,
            retry_delay_s=s.ingest_retry_delay_s,
            claim_idle_s=s.ingest_claim_idle_s,
            settled=self.queued_ends.remove,
        )

    def start_ingest_worker(self) -> IngestWorker:
        """Run a worker thread in this process (the API does in queue mode with AGTOS_INGEST_WORKER)."""
        if self.worker is None or not self.worker.alive:
            self.worker = self.ingest_worker().start()
        return self.worker

    def stop_ingest_worker(self, timeout_s: float = 30.0) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.stop(timeout_s)

    def ingest_queue_check(self) -> dict[str, Any]:
        return ingest_queue_check(
            self.ingest_queue, self.settings.ingest_mode, self.worker is not None and self.worker.alive
        )

    def end_idle_sessions(self, idle_s: float | None = None) -> list[SessionEndResult]:
        """End sessions silent for ``idle_s`` (default AGTOS_SESSION_IDLE_MINUTES): an agent that never
        calls /end loses nothing. First the sessions this process saw, then those of Redis's index of
        live journals that no process appended to for as long (after an API restart, or seen only by a
        process that is gone), through :meth:`end_session` as well: a session ended twice is stored once.
        Sessions Redis cannot take now stay for the next sweep."""
        idle = self.settings.session_idle_minutes * 60 if idle_s is None else idle_s
        ended = []
        seen = set()
        for user_id, session_id in self.activity.idle_sessions(idle):
            seen.add((user_id, session_id))
            try:
                ended.append(self.end_session(user_id, session_id))
            except StorageUnavailable:
                log.warning("idle session %s/%s not ended yet: Redis unavailable", user_id, session_id)
        try:
            indexed = self.services.journal.idle(idle)
        except StorageUnavailable:
            log.warning("journalled idle sessions not swept yet: Redis unavailable")
            return ended
        for entry in indexed:
            if (entry.user_id, entry.session_id) in seen:
                continue
            try:
                result = self.end_session(entry.user_id, entry.session_id)
                # ended: the journal's clear dropped the member; not ended (no turns: an expired
                # journal; an opted-out user): drop it unless an append renewed it meanwhile
                self.services.journal.unindex(entry)
            except InvalidIdentifier:  # not written by this code: nothing to end
                log.warning("idle-session index names no session: %s/%s", entry.user_id, entry.session_id)
                self.services.journal.unindex(entry)
                continue
            except StorageUnavailable:
                log.warning("idle session %s/%s not ended yet: Redis unavailable", entry.user_id, entry.session_id)
                continue
            if result.status != "skipped" or result.reason != "session has no turns":
                ended.append(result)
        return ended

    def _clear_session(self, user_id: str, session_id: str, read: JournalRead) -> None:
        """The stretch ``read`` is stored: those turns are cleared from the journal first (a failure
        leaves it live and whole), then the session is dropped from this process (another process
        drops its copy when it next looks: see :meth:`_session_turns` and :meth:`session`).

        Turns appended after the read (acknowledged while the episode was stored) stay journalled:
        the session stays live and indexed, its activity kept for the idle sweeper, and its view
        is replayed from the journal on the next look."""
        left = self.services.journal.clear(user_id, session_id, read)
        self.working.drop(user_id, session_id)
        if left:
            log.info("session %s/%s: %d turns appended during its end stay live", user_id, session_id, left)
        else:
            self.activity.session_ended(user_id, session_id)
