"""The ingestion worker: takes ended sessions off the durable queue and makes them searchable.

A session end on the API path only decides whether the session is kept and queues a
:class:`SessionJob` (the turns themselves, so the queue entry is the durable copy). The worker
(``agtos worker``, or a thread of ``agtos serve``) runs :func:`ingest_session`: summary, NER,
memories, one embedding call, the indexes, the entity graph, then the ``sessionEnded`` event
(the Dreamer). A job is idempotent: the episode id is derived from the user, the session and
the turns (``episodic.segment_key``) and every write is an upsert, so a retry after a crash stores
the episode once. A failed job is handed back and retried after a delay; after
``max_attempts`` deliveries it goes to the dead-letter stream. The API's worker thread yields to
the requests in flight (:meth:`IngestWorker.yield_to`, ``AGTOS_WORKER_YIELD_MAX_S``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from agtos.memory.episodic import EpisodeDraft, build_episode, session_episode_id
from agtos.memory.ingestion_pipeline import FORGOTTEN_WHILE_STORED, dreaming_steps, run_ingestion
from agtos.memory.privacy_controls import NotFoundError
from agtos.memory.vector_repair import fill_after_ingestion
from agtos.schemas import IngestItem, Turn
from agtos.storage.ingest_queue import IngestQueue, QueueEntry, entry_ms
from agtos.storage.redis_conn import StorageUnavailable
from agtos.storage.user_lock import LockWaitTooLong

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
BLOCK_S = 0.5
#: queued session ends a worker takes at once: one NER pipe and one embedding call for them (8 -> 32: the
#: model runs larger length buckets and the queue path's CPU per turn fell ~4 %, docs/measurements.md)
BATCH_JOBS = 32
#: turn text (characters) one ingestion run takes at most, as far as whole jobs allow: an end that holds
#: more runs alone, after the batch's others, so a large session (its end costs about its text's
#: embedding: 90 KB ~50 s on 2 cores at load 8, docs/measurements.md) does not hold the smaller ends
#: read with it (issue 15); 32 ends of 2 KB still run together
RUN_MAX_CHARS = 64 * 1024
YIELD_POLL_S = 0.02  # how often a yielding worker looks at the requests in flight


class SessionJob(BaseModel):
    """What a session end hands the worker: one stretch (segment) of a session's turns."""

    user_id: str
    session_id: str
    segment: str
    turns: list[Turn]
    #: when it was queued (Redis clock, ms; the worker sets it from its entry id): a forget-all of the
    #: user after that drops it
    queued_ms: int | None = None

    @property
    def episode_id(self) -> str:
        return session_episode_id(self.user_id, self.session_id, self.segment)


def ingest_session(rt: Services, job: SessionJob, emit: Callable[[dict[str, Any]], None]) -> EpisodeDraft:
    """Episode, memories, vectors, indexes, entities, then the ``sessionEnded`` event. Idempotent.

    A user who opted out after the session ended gets nothing stored (:func:`ingest_sessions` of one)."""
    return ingest_sessions(rt, [job], emit)[0]


def ingest_sessions(rt: Services, jobs: list[SessionJob], emit: Callable[[dict[str, Any]], None]) -> list[EpisodeDraft]:
    """:func:`ingest_session` of several jobs with one :func:`run_ingestion` (one NER pipe, one
    embedding call with the texts of all of them bucketed by length), then each job's
    ``sessionEnded`` event in queue order; an event followed by another of the same user's in
    this batch says so (``more_for_user``), so the Dreamer consolidates each user once per batch.
    Idempotent like one job: a failure part-way leaves upserts that a rerun of any of the jobs repeats."""
    drafts = [build_episode(j.user_id, j.session_id, j.turns, rt.summariser, j.segment) for j in jobs]
    forgotten: set[str] = set()  # episodes forgotten while the run stored them: answered not saved
    kept = [
        (job, draft)
        for job, draft in zip(jobs, drafts, strict=True)
        if draft.decision.save and not rt.privacy.is_opted_out(job.user_id, fresh=True)
    ]
    if kept:
        existing = existing_episodes(rt, [(job.user_id, draft.episode.id) for job, draft in kept])
        # each user is marked "dream pending" with their episodes' write: their Dreamer run is never lost
        # between the store and the event (Redis away, the process killed), the sweep runs it then
        steps = dreaming_steps(job.user_id for job, _ in kept)
        report = run_ingestion(rt, [job_item(j, d) for j, d in kept], steps)
        stored = set(report.episode_ids)  # less the jobs of users who forgot everything after queueing them
        vanished = {s["sessionId"] for s in report.skipped if s["reason"] == FORGOTTEN_WHILE_STORED}
        forgotten |= {d.episode.id for j, d in kept if j.session_id in vanished and d.episode.id not in stored}
        kept = unstore_opted_out(rt, [(job, draft) for job, draft in kept if draft.episode.id in stored], existing)
        for job, _ in kept:
            rt.query_ingest.mark_interaction_saved(job.user_id, job.session_id)
        fill_after_ingestion(rt, report)  # the embedder answered: records stored without vectors get theirs
    for at, (job, draft) in enumerate(kept):  # after every step that can fail: a failed batch emits none
        event: dict[str, Any] = {"user_id": job.user_id, "session_id": job.session_id, "episode_id": draft.episode.id}
        if any(later.user_id == job.user_id for later, _ in kept[at + 1 :]):
            event["more_for_user"] = True  # the Dreamer may leave its run to this user's last event
        emit(event)
    forgotten |= unmark_forgotten(rt, kept)
    return [forgotten_draft(d) if d.episode.id in forgotten else d for d in drafts]


def job_chars(job: SessionJob) -> int:
    """The characters of turn text a job brings (what its ingestion's cost grows with)."""
    return sum(len(turn.content) for turn in job.turns)


def job_runs(jobs: Sequence[SessionJob], max_chars: int | None = None) -> list[list[int]]:
    """The ingestion runs of a batch of jobs read together, as positions in ``jobs``: consecutive jobs
    up to ``max_chars`` (:data:`RUN_MAX_CHARS`) of turn text per run. A job past it, and every later
    job of its user (a user's ends keep their order), is deferred after the others; a job past it
    runs alone."""
    limit = RUN_MAX_CHARS if max_chars is None else max_chars
    sizes = [job_chars(job) for job in jobs]
    deferred: set[str] = set()
    first: list[int] = []
    later: list[int] = []
    for at, job in enumerate(jobs):
        if job.user_id in deferred or sizes[at] > limit:
            deferred.add(job.user_id)
            later.append(at)
        else:
            first.append(at)
    runs: list[list[int]] = []
    held = 0
    for at in first + later:
        if not runs or held + sizes[at] > limit:
            runs.append([])
            held = 0
        runs[-1].append(at)
        held += sizes[at]
    return runs


def unmark_forgotten(rt: Services, kept: list[tuple[SessionJob, EpisodeDraft]]) -> set[str]:
    """The ids of the ``kept`` episodes forgotten (one forget, or forget-all) after the run's last check
    of its records, with what was written for them since deleted again: the session's query-as-ingest
    stamp and the Dreamer's marker. A forget landing after this check deletes those itself."""
    stored = existing_episodes(rt, [(job.user_id, draft.episode.id) for job, draft in kept])
    gone = [(job, draft.episode.id) for job, draft in kept if draft.episode.id not in stored]
    for job, episode_id in gone:
        rt.query_ingest.reset_session(job.user_id, job.session_id)
        rt.dream_markers.forget(job.user_id, episode_id)
    return {episode_id for _, episode_id in gone}


def forgotten_draft(draft: EpisodeDraft) -> EpisodeDraft:
    """``draft`` answered as not saved: its episode was forgotten while the run stored it (an inline
    end then records no episode id for the session)."""
    return replace(draft, decision=replace(draft.decision, save=False, reason=FORGOTTEN_WHILE_STORED))


def existing_episodes(rt: Services, pairs: Iterable[tuple[str, str]]) -> set[str]:
    """Of these (user id, episode id) pairs, the episode ids already stored, one Redis call per user."""
    by_user: dict[str, list[str]] = {}
    for user_id, episode_id in pairs:
        by_user.setdefault(user_id, []).append(episode_id)
    return {i for user_id, ids in by_user.items() for i in rt.episodes.existing_ids(user_id, ids)}


def unstore_opted_out(
    rt: Services, stored: list[tuple[SessionJob, EpisodeDraft]], existing: set[str]
) -> list[tuple[SessionJob, EpisodeDraft]]:
    """The run's jobs less those of users who opted out while it wrote (from any process): the episodes
    it added for them are forgotten again, with what was learnt from them alone (README: an opted-out
    user keeps working memory only); ``existing``: episodes stored before the run, which stay."""
    opted = {u for u in {job.user_id for job, _ in stored} if rt.privacy.is_opted_out(u, fresh=True)}
    for job, draft in stored:
        if job.user_id in opted and draft.episode.id not in existing:
            with contextlib.suppress(NotFoundError):
                rt.privacy.forget_item(job.user_id, "episode", draft.episode.id)
    return [(job, draft) for job, draft in stored if job.user_id not in opted]


def job_item(job: SessionJob, draft: EpisodeDraft) -> IngestItem:
    """What :func:`run_ingestion` takes of a job: its turns, its episode and when it was queued."""
    return IngestItem(
        user_id=job.user_id, session_id=job.session_id, turns=job.turns, episode=draft.episode, since_ms=job.queued_ms
    )


def entry_job(entry: QueueEntry) -> SessionJob:
    """The job a queue entry holds, with the time it was queued (its id's ms, the Redis clock)."""
    return SessionJob.model_validate_json(entry.payload).model_copy(update={"queued_ms": entry_ms(entry.id)})


def consumer_name() -> str:
    """Unique per worker: host, process and a random suffix (a restarted worker is a new consumer)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class IngestWorker:
    """Reads the queue and runs each job through ``handle``; retries, reclaims, dead-letters.

    With ``handle_many``, up to ``batch`` new entries read at once go through it together (one
    ingestion run for all: :func:`ingest_sessions`) and are acknowledged together; if it fails,
    each of them is run through ``handle`` on its own, so a failing job is retried or dead-lettered
    alone. Reclaimed (stale) entries always go one at a time."""

    def __init__(
        self,
        queue: IngestQueue,
        handle: Callable[[SessionJob], object],
        *,
        handle_many: Callable[[list[SessionJob]], object] | None = None,
        plan: Callable[[list[SessionJob]], list[list[int]]] | None = None,
        batch: int = BATCH_JOBS,
        max_attempts: int = 5,
        retry_delay_s: float = 5.0,
        claim_idle_s: float = 120.0,
        block_s: float = BLOCK_S,
        consumer: str | None = None,
        settled: Callable[[str, list[str]], object] | None = None,
    ) -> None:
        self.queue = queue
        self.handle = handle
        self.settled = settled
        self.handle_many = handle_many
        self.plan = plan
        self.batch = max(1, batch) if handle_many is not None else 1
        self.max_attempts = max(1, max_attempts)
        self.retry_delay_ms = int(retry_delay_s * 1000)
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.block_ms = max(1, int(block_s * 1000))
        self.consumer = consumer or consumer_name()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0
        self._busy: Callable[[], bool] | None = None
        self._yield_max_s = 0.0

    def yield_to(self, busy: Callable[[], bool] | None, max_s: float) -> IngestWorker:
        """Before each batch, wait while ``busy()`` (the API's requests in flight), at most ``max_s``
        seconds per batch, so a worker thread in the API process gives its CPU to the requests and
        still makes progress under sustained load. ``None`` or ``max_s`` 0: never wait (``agtos worker``)."""
        self._busy, self._yield_max_s = busy, max(0.0, max_s)
        return self

    # -- one pass ----------------------------------------------------------------------
    def run_once(self, block: bool = True) -> int:
        """Handle stale entries first, else wait briefly for new ones; returns entries handled.
        With :meth:`yield_to`, entries taken wait (bounded) for the requests in flight; new ones
        queued meanwhile join them, up to the batch."""
        self._beat()
        stale = self.queue.claim_stale(self.consumer, self.claim_idle_ms, 1)
        entries = stale or self.queue.read(self.consumer, self.batch, self.block_ms if block else 0)
        if entries and self._yield() > 0 and not stale and len(entries) < self.batch:
            entries += self.queue.read(self.consumer, self.batch - len(entries), 0)
        if len(entries) > 1:
            self._process_many(entries)
        elif entries:
            self._process(entries[0])
        return len(entries)

    def drain(self, timeout_s: float = 60.0) -> int:
        """Handle entries until none is ready (tests, ``agtos worker --once``); returns the count."""
        deadline, handled = time.monotonic() + timeout_s, 0
        while time.monotonic() < deadline:
            n = self.run_once(block=False)
            if not n:
                break
            handled += n
        return handled

    def _process(self, entry: QueueEntry) -> None:
        if entry.deliveries > self.max_attempts:  # e.g. a job that kills its worker each time
            self.queue.dead_letter(entry, f"delivered {entry.deliveries} times without success")
            return
        try:
            job = entry_job(entry)
        except ValidationError as exc:
            self.queue.dead_letter(entry, f"unreadable job: {exc.error_count()} validation errors")
            return
        if not self._still_queued([entry]):
            return
        started = time.monotonic()
        try:
            with self._holding([entry.id]):
                self.handle(job)
        except Exception as exc:
            log.warning("ingest job %s (attempt %d) failed: %s", entry.id, entry.deliveries, exc, exc_info=True)
            error = f"{type(exc).__name__}: {exc}"
            # live holders kept a user's lock: not the job's failure, so this delivery is not counted
            uncount = entry.deliveries if isinstance(exc, LockWaitTooLong) else None
            if uncount is None and entry.deliveries >= self.max_attempts:
                self.queue.dead_letter(entry, f"failed {entry.deliveries} times", error)
                self._settle(job.user_id, [entry.id])
            else:
                self.queue.retry_later(entry.id, self.consumer, self.retry_delay_ms, self.claim_idle_ms, error, uncount)
            return
        self.queue.ack(entry.id, time.monotonic() - started)
        self._settle(job.user_id, [entry.id])

    def _process_many(self, entries: list[QueueEntry]) -> None:
        """First deliveries read together: each run of them (``plan``; else one) through one
        ``handle_many`` call, then one ack each, its run's time shared out: a run's ends are done
        (and a client waiting for one answered) before the next run starts."""
        jobs: list[tuple[QueueEntry, SessionJob]] = []
        for entry in entries:
            try:
                jobs.append((entry, entry_job(entry)))
            except ValidationError as exc:
                self.queue.dead_letter(entry, f"unreadable job: {exc.error_count()} validation errors")
        runs = self.plan([job for _, job in jobs]) if self.plan is not None and jobs else [list(range(len(jobs)))]
        for run in runs:
            self._beat()  # runs of a batch may take minutes: the worker stays alive in /health
            self._process_run([jobs[at] for at in run])

    def _process_run(self, jobs: list[tuple[QueueEntry, SessionJob]]) -> None:
        """One ``handle_many`` call, then one ack each (the run's time shared out); on failure each
        entry goes through :meth:`_process` alone."""
        present = self._still_queued([entry for entry, _ in jobs])
        jobs = [(entry, job) for entry, job in jobs if entry.id in present]
        if not jobs:
            return
        assert self.handle_many is not None
        started = time.monotonic()
        try:
            with self._holding([entry.id for entry, _ in jobs]):
                self.handle_many([job for _, job in jobs])
        except Exception as exc:
            log.warning("batch of %d ingest jobs failed (%s); running them one at a time", len(jobs), exc)
            for entry, _ in jobs:
                self._process(entry)
            return
        share = (time.monotonic() - started) / len(jobs)
        for entry, _ in jobs:
            self.queue.ack(entry.id, share)
        for user_id in {job.user_id for _, job in jobs}:
            self._settle(user_id, [entry.id for entry, job in jobs if job.user_id == user_id])

    def _still_queued(self, entries: list[QueueEntry]) -> set[str]:
        """The ids of these entries still in the stream, just before their run. The others left it since
        they were read (a quiet user's read stored them, ``agtos.memory.read_catchup``; a forget-all
        dropped them): acknowledged (out of the pending list, not counted done), not run again."""
        present = set(self.queue.entries([entry.id for entry in entries]))
        for entry in entries:
            if entry.id not in present:
                self.queue.ack(entry.id, 0.0)
        return present

    def _settle(self, user_id: str, entry_ids: list[str]) -> None:
        """The user's entries left the queue (acked or dead-lettered): ``settled`` (their user's set of
        queued ends). A failure only logs: a stale id there is dropped by the next read that looks."""
        if self.settled is None:
            return
        try:
            self.settled(user_id, entry_ids)
        except Exception as exc:
            log.warning("ingest worker could not unlist %s of user %s: %s", entry_ids, user_id, exc)

    @contextlib.contextmanager
    def _holding(self, entry_ids: list[str]) -> Iterator[None]:
        """While the block runs (a large session's end takes minutes), hold its entries every third of
        ``claim_idle_s``: no other worker claims them as a dead consumer's and runs them again (each such
        claim also counted a delivery, towards the dead-letter stream); and beat every ``HEARTBEAT_S``, so
        ``/health`` does not count the worker gone (a heartbeat older than 15 s) while it works."""
        done = threading.Event()
        period = self.claim_idle_ms / 3000

        def keep() -> None:
            due = time.monotonic() + period
            while not done.wait(min(period, HEARTBEAT_S)):
                try:
                    if time.monotonic() >= due:
                        self.queue.hold(self.consumer, entry_ids)
                        due = time.monotonic() + period
                    self._beat()
                except Exception as exc:  # Redis away: the job goes on; a stale claim is the fallback
                    log.warning("ingest worker could not hold its entries: %s", exc)

        keeper = threading.Thread(target=keep, name="ingest-hold", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            done.set()
            keeper.join()

    def _yield(self) -> float:
        """Wait while requests are in flight, at most the cap (0: never); returns seconds waited (0: none)."""
        busy, cap = self._busy, self._yield_max_s
        if busy is None or cap <= 0 or not busy():
            return 0.0
        started = time.monotonic()
        deadline = started + cap
        while busy() and time.monotonic() < deadline and not self._stop.wait(YIELD_POLL_S):
            self._beat()  # a long cap must not make the worker look dead in /health
        return time.monotonic() - started

    def _beat(self) -> None:
        now = time.monotonic()
        if now - self._last_beat >= HEARTBEAT_S:
            self.queue.heartbeat(self.consumer)
            self._last_beat = now

    # -- the loop ----------------------------------------------------------------------
    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Loop until ``stop`` (or :meth:`stop`); Redis outages are waited out."""
        stop = stop or self._stop
        backoff = 0.5
        log.info("ingest worker %s started", self.consumer)
        while not stop.is_set() and not self._stop.is_set():
            try:
                self.run_once()
                backoff = 0.5
            except StorageUnavailable as exc:
                log.warning("ingest worker waiting for Redis: %s", exc)
                stop.wait(backoff)
                backoff = min(10.0, backoff * 2)
            except Exception:
                log.exception("ingest worker loop error; continuing")
                stop.wait(backoff)
        with contextlib.suppress(StorageUnavailable):
            self.queue.leave(self.consumer)
        log.info("ingest worker %s stopped", self.consumer)

    def start(self) -> IngestWorker:
        """Run the loop on a daemon thread of this process."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run_forever, name="ingest-worker", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the loop to stop after the job in hand and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
