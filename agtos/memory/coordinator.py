"""MemoryCoordinator: the API and CLI facade over the services of one process.

It validates ids, applies the privacy rules and composes the memory services (sessions here;
recall, ingestion, Dreamer, lint and health in their modules). The Prefect flows never see it:
they work on :class:`agtos.memory.services.Services`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agtos.config import Settings
from agtos.memory import memory_crud, recall
from agtos.memory.conversation_ingest import ingest_conversations
from agtos.memory.dreamer import DreamerScheduler
from agtos.memory.dreamer_pipeline import DreamReport, run_dreamer
from agtos.memory.episodic import segment_key
from agtos.memory.health_checks import health, ingest_queue_check
from agtos.memory.ingest_worker import IngestWorker, SessionJob, ingest_session
from agtos.memory.ingestion_pipeline import IngestionReport, run_ingestion
from agtos.memory.query_ingest import response_episode
from agtos.memory.recall import SearchHit
from agtos.memory.services import Services
from agtos.memory.source_import import import_sources
from agtos.memory.working import WorkingMemory
from agtos.providers.embeddings import Embedder
from agtos.providers.llm import LLMProvider
from agtos.schemas import (
    Conclusion,
    Episode,
    IngestItem,
    MaintenanceReport,
    Memory,
    MemoryChange,
    MemoryKind,
    ProfileUpdate,
    Turn,
    UserProfile,
)
from agtos.schemas.api import ConversationSession, ConversationsOut, MaintenanceRun, ResponseIngestOut
from agtos.storage.conclusions import ConclusionStore
from agtos.storage.ingest_queue import IngestQueue
from agtos.storage.keys import check_record_id, check_user_id
from agtos.storage.redis_conn import RedisConnector, StorageUnavailable
from agtos.storage.session_journal import JournalFull
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


class MemoryCoordinator:
    """Owns the services of one service process; the API and CLI call only this."""

    def __init__(
        self,
        settings: Settings,
        connector: RedisConnector | None = None,
        llm: LLMProvider | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.services = s = Services(settings, connector, llm, embedder)
        # what callers reach through the facade (the API's routers, the CLI, tests)
        self.settings = s.settings
        self.keys = s.keys
        self.connector = s.connector
        self.events = s.events
        self.working = s.working
        self.episodes = s.episodes
        self.profiles = s.profiles
        self.maintenance = s.maintenance
        self.semantic = s.semantic
        self.entities = s.entities
        self.recognizer = s.recognizer
        self.nli_cache = s.nli_cache
        self.summariser = s.summariser
        self.activity = s.activity
        self.privacy = s.privacy
        # the one trigger of the Dreamer: the sessionEnded event
        self.dreamer = DreamerScheduler(s, settings.dreamer_retries, settings.dreamer_retry_delay_s)
        s.events.subscribe(SESSION_ENDED, self.dreamer.on_session_ended)
        # session-end ingestion in queue mode: the durable queue and this process's worker (if any)
        self.ingest_queue = IngestQueue(s.connector, s.keys)
        self.worker: IngestWorker | None = None

    @property
    def conclusions(self) -> ConclusionStore:
        return self.services.conclusions

    # -- working memory ---------------------------------------------------------------
    def add_turn(self, user_id: str, session_id: str, turn: Turn) -> WorkingMemory:
        """Append one turn (see :meth:`add_turns`)."""
        return self.add_turns(user_id, session_id, [turn])

    def add_turns(self, user_id: str, session_id: str, turns: list[Turn]) -> WorkingMemory:
        """Journal the turns in Redis, all or none, and only then add them to working memory: a
        returned append is durable. ``StorageUnavailable`` (Redis down) and ``JournalFull`` (a cap
        passed) leave nothing written. An opted-out user's turns stay in working memory only."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        wm = self.working.get_or_create(user_id, session_id)
        with wm.lock:
            if self.privacy.is_opted_out(user_id):
                for turn in turns:
                    wm.add(turn)
            else:
                self._journal(user_id, session_id, wm, turns)
        self.activity.turn(user_id, session_id)
        return wm

    def session(self, user_id: str, session_id: str) -> WorkingMemory | None:
        """The live session as its Redis journal has it: replayed when this process does not hold
        it (after a restart, an LRU eviction, or on another API worker), brought up to date when
        another worker appended, None once it was ended elsewhere. This process's view while Redis
        is down; None when there is no session."""
        check_record_id(session_id, "session id")
        wm = self.working.get(check_user_id(user_id), session_id)
        if self.privacy.is_opted_out(user_id):
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

    def _journal(self, user_id: str, session_id: str, wm: WorkingMemory, turns: list[Turn]) -> None:
        """Append to the journal (the caller holds ``wm.lock``), then to ``wm``, with any turns
        other processes journalled first; on failure ``wm`` is left as it was."""
        try:
            appended = self.services.journal.append(user_id, session_id, turns, seen=wm.journal_len)
        except (StorageUnavailable, JournalFull):
            if not wm.messages:  # created for this append: not a live session
                self.working.discard(user_id, session_id, wm)
            raise
        if appended.reset:
            wm.reset()
        self._journal_catch_up(wm, [*appended.unseen, *turns])

    @staticmethod
    def _journal_catch_up(wm: WorkingMemory, turns: list[Turn]) -> None:
        for turn in turns:
            wm.add(turn)
        wm.journal_len += len(turns)

    def _session_turns(self, user_id: str, session_id: str) -> list[Turn]:
        """What ending the session ingests: its journal. ``StorageUnavailable`` when Redis cannot be
        read (never "no turns": the session stays live, for a retry or the idle sweeper). An empty
        journal falls back to this process's copy (its journal expired, or the turns were kept
        while the user had opted out), unless the session was ended elsewhere (another API process
        or the sweeper there): that copy is stale and is dropped, not stored a second time."""
        turns = self.services.journal.turns(user_id, session_id)
        if turns:
            return turns
        wm = self.working.get(user_id, session_id)
        if wm is None:
            return []
        marker = self.keys.user(user_id).session_ended(session_id)
        ended_elsewhere = bool(wm.journal_len) and bool(self.connector.run(lambda r: r.exists(marker)))
        with wm.lock:
            if ended_elsewhere:
                self.working.discard(user_id, session_id, wm)
                return []
            return list(wm.messages)

    # -- episodic memory --------------------------------------------------------------
    def end_session(self, user_id: str, session_id: str, wait_s: float = 0.0) -> SessionEndResult:
        """End the session: its turns become an episode if the save heuristics keep it (idempotent).

        Inline mode stores the episode now. Queue mode (AGTOS_INGEST_MODE=queue) only takes the
        turns into a durable queue job and returns ``queued``; a worker stores the episode. With
        ``wait_s`` it waits up to that long for the worker and answers ``done`` if it finished."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        if self.privacy.is_opted_out(user_id):
            had_turns = self.working.get(user_id, session_id) is not None
            self.working.drop(user_id, session_id)
            self.activity.session_ended(user_id, session_id)
            reason = "user opted out of persistence" if had_turns else "session has no turns"
            return SessionEndResult(session_id, False, reason, None, status="skipped")
        # Redis down while reading, queueing, storing or clearing: StorageUnavailable (503) and the
        # session stays live (activity included), so a retry or the idle sweeper ends it later; a
        # repeat of a half-done end stores the same episode (ids from the turns, upserts)
        turns = self._session_turns(user_id, session_id)
        if not turns:
            self.activity.session_ended(user_id, session_id)
            return SessionEndResult(session_id, False, "session has no turns", None, status="skipped")
        job = SessionJob(user_id=user_id, session_id=session_id, segment=segment_key(turns), turns=turns)
        if self.settings.ingest_mode == "queue":
            return self._enqueue_session(job, wait_s)
        draft = ingest_session(self.services, job, self._emit_session_ended)
        self._clear_session(user_id, session_id)
        if not draft.decision.save:
            return SessionEndResult(session_id, False, draft.decision.reason, None, status="skipped")
        return SessionEndResult(
            session_id, True, draft.decision.reason, draft.episode, draft.episode.id, "done", len(turns)
        )

    def _enqueue_session(self, job: SessionJob, wait_s: float) -> SessionEndResult:
        """Queue mode: decide (cheap, pure), queue the job, clear the session; the worker ingests."""
        decision = decide_save(job.turns, extract(job.turns))
        if not decision.save:
            self._clear_session(job.user_id, job.session_id)
            return SessionEndResult(job.session_id, False, decision.reason, None, status="skipped")
        entry_id, position = self.ingest_queue.enqueue(job.model_dump_json().encode())
        # the queue entry holds the turns now; a crash before this line leaves the journal for a retry
        self._clear_session(job.user_id, job.session_id)
        result = SessionEndResult(
            job.session_id, True, decision.reason, None, job.episode_id, "queued", len(job.turns), position
        )
        if wait_s > 0 and self._wait_for_job(entry_id, wait_s):
            stored = self.episodes.get(job.user_id, job.episode_id)
            if stored is not None:
                return dataclasses.replace(result, episode=stored, status="done", queue_position=None)
        return dataclasses.replace(result, searchable_in_s=self._estimate_wait(position))

    def _wait_for_job(self, entry_id: str, wait_s: float) -> bool:
        """True once the queue entry is gone (done, or dead-lettered) within ``wait_s``."""
        deadline = time.monotonic() + wait_s
        try:
            while self.ingest_queue.contains(entry_id):
                if time.monotonic() >= deadline:
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

    def ingest_worker(self) -> IngestWorker:
        """A worker over this process's services (``agtos worker``, or the API's thread)."""
        s = self.settings
        return IngestWorker(
            self.ingest_queue,
            self.ingest_job,
            max_attempts=s.ingest_max_attempts,
            retry_delay_s=s.ingest_retry_delay_s,
            claim_idle_s=s.ingest_claim_idle_s,
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
        calls /end loses nothing. Sessions Redis cannot take now stay for the next sweep."""
        idle = self.settings.session_idle_minutes * 60 if idle_s is None else idle_s
        ended = []
        for user_id, session_id in self.activity.idle_sessions(idle):
            try:
                ended.append(self.end_session(user_id, session_id))
            except StorageUnavailable:
                log.warning("idle session %s/%s not ended yet: Redis unavailable", user_id, session_id)
        return ended

    def _clear_session(self, user_id: str, session_id: str) -> None:
        """The session is over: marked ended (for other processes' stale copies), its journal
        cleared (a failure up to here leaves it live and whole), then dropped from this process."""
        marker, ttl = self.keys.user(user_id).session_ended(session_id), self.settings.session_journal_ttl_seconds
        self.connector.run(lambda r: r.set(marker, int(time.time()), ex=ttl))
        self.services.journal.clear(user_id, session_id)
        self.working.drop(user_id, session_id)
        self.activity.session_ended(user_id, session_id)

    def list_episodes(self, user_id: str, limit: int = 20) -> list[Episode]:
        return self.episodes.recent(check_user_id(user_id), limit)

    def ingest(self, items: list[IngestItem]) -> IngestionReport:
        """Run the ingestion steps in-process (the Prefect flow runs the same steps as tasks)."""
        allowed = [i for i in items if not self.privacy.is_opted_out(i.user_id)]
        report = run_ingestion(self.services, allowed) if allowed else IngestionReport()
        report.received = len(items)
        report.skipped += [
            {"sessionId": i.session_id, "reason": "user opted out of persistence"} for i in items if i not in allowed
        ]
        return report

    def import_sources(
        self, user_id: str, sources: list[str] | None = None, home: Path | None = None
    ) -> dict[str, Any]:
        """Import other tools' chat history and memory files as episodes and memories (idempotent)."""
        self.privacy.require_persistence(check_user_id(user_id))
        return import_sources(self.services, self.ingest, user_id, sources, home)

    def ingest_conversations(self, user_id: str, sessions: list[ConversationSession]) -> ConversationsOut:
        """Past sessions of a chat log as episodes in one batch; session ids already stored are left as they are."""
        self.privacy.require_persistence(check_user_id(user_id))
        return ingest_conversations(self.services, self.ingest, user_id, sessions)

    def known_users(self) -> list[str]:
        """Every user with stored memory (the nightly lint walks them)."""
        return self.services.users.known()

    # -- recall -----------------------------------------------------------------------
    def search_episodes(self, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[SearchHit]:
        """Episodes by hybrid (default), vector or BM25 search, best first, re-ranked by recency."""
        return recall.search_episodes(self.services, check_user_id(user_id), query, limit, mode)

    def search_memories(self, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[Memory]:
        """Semantic memories (facts, preferences) relevant to ``query``, best first."""
        return recall.search_memories(self.services, check_user_id(user_id), query, limit, mode)

    def build_context(
        self,
        user_id: str,
        query: str,
        session_id: str | None = None,
        budget_tokens: int = 800,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Working + episodic + semantic recall → dedup → rank → budget → a system-prompt section."""
        check_user_id(user_id)
        wm = self.session(user_id, session_id) if session_id else None
        return recall.build_context(self.services, user_id, query, wm, budget_tokens, limit)

    def ask(self, user_id: str, question: str, limit: int = 5) -> dict[str, Any]:
        """Dialectic: answer a question about the user from profile, conclusions, memories, episodes."""
        return recall.ask(self.services, check_user_id(user_id), question, limit)

    # -- memories (CRUD over the semantic tier) ------------------------------------------
    def create_memory(
        self,
        user_id: str,
        text: str,
        kind: MemoryKind = MemoryKind.fact,
        source: str | None = None,
        valid_from: int | None = None,
        valid_until: int | None = None,
    ) -> memory_crud.MemoryWrite:
        """Store a memory directly, or merge it into its stored near-duplicate."""
        self.privacy.require_persistence(check_user_id(user_id))
        return memory_crud.create(self.services, user_id, text, kind, source, valid_from, valid_until)

    def list_memories(
        self, user_id: str, query: str | None = None, kind: MemoryKind | None = None, limit: int = 20, offset: int = 0
    ) -> memory_crud.MemoryPage:
        return memory_crud.listing(self.services, check_user_id(user_id), query, kind, limit, offset)

    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        check_record_id(memory_id, "memory id")
        return memory_crud.get(self.services, check_user_id(user_id), memory_id)

    def update_memory(
        self,
        user_id: str,
        memory_id: str,
        text: str | None = None,
        kind: MemoryKind | None = None,
        valid_from: int | None = None,
        valid_until: int | None = None,
        clear_until: bool = False,
    ) -> Memory:
        check_record_id(memory_id, "memory id")
        self.privacy.require_persistence(check_user_id(user_id))
        return memory_crud.update(self.services, user_id, memory_id, text, kind, valid_from, valid_until, clear_until)

    def delete_memory(self, user_id: str, memory_id: str) -> None:
        check_record_id(memory_id, "memory id")
        self.privacy.require_persistence(check_user_id(user_id))
        self.privacy.forget_item(user_id, "memory", memory_id)  # every index, caches and its history

    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryChange]:
        check_record_id(memory_id, "memory id")
        return memory_crud.history(self.services, check_user_id(user_id), memory_id)

    # -- conclusions, Dreamer, lint, query-as-ingest ------------------------------------
    def list_conclusions(self, user_id: str, limit: int = 50, kind: str | None = None) -> list[Conclusion]:
        return self.conclusions.recent(check_user_id(user_id), limit, kind)

    def delete_conclusion(self, user_id: str, conclusion_id: str) -> bool:
        check_record_id(conclusion_id, "conclusion id")
        return self.conclusions.delete(check_user_id(user_id), conclusion_id)

    def dream(self, user_id: str) -> DreamReport:
        """Run the Dreamer for a user now (manual trigger; the session-end path is automatic)."""
        return run_dreamer(self.services, check_user_id(user_id))

    def maintain(self, user_id: str) -> MaintenanceReport:
        """One lint sweep for a user, gated by the ResourceGuard (see memory/lint_pipeline.py)."""
        from agtos.memory.lint_pipeline import maintain  # Polars and DuckDB load with the first sweep

        self.privacy.require_persistence(check_user_id(user_id))
        return maintain(self.services, user_id)

    def maintain_run(self, run: MaintenanceRun) -> MaintenanceRun:
        """Carry out a run requested over HTTP (queued by the API; its state saved at each step)."""
        from agtos.memory.lint_pipeline import maintain_run

        return maintain_run(self.services, run)

    def ingest_response(
        self,
        user_id: str,
        session_id: str,
        response: str,
        query: str | None = None,
        tool_calls: int = 0,
        reasoning_steps: int | None = None,
    ) -> ResponseIngestOut:
        """Query-as-Ingest: keep a valuable agent response as a ``response_ingest`` episode."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        self.privacy.require_persistence(user_id)
        decision = self.services.query_ingest.evaluate(
            user_id, session_id, response, tool_calls=tool_calls, reasoning_steps=reasoning_steps
        )
        episode = None
        if decision.ingest:
            episode = response_episode(user_id, session_id, response, query, decision.score)
            self.ingest([IngestItem(user_id=user_id, session_id=session_id, episode=episode)])
        return decision.response(episode)

    # -- profile, health --------------------------------------------------------------
    def get_profile(self, user_id: str) -> UserProfile:
        """The stored profile; its ``opt_out`` is the privacy setting (``/privacy``)."""
        profile = self.profiles.get(check_user_id(user_id))
        return profile.model_copy(update={"opt_out": self.privacy.is_opted_out(user_id)})

    def update_profile(self, user_id: str, update: ProfileUpdate) -> UserProfile:
        """Merge the fields sent. ``opt_out`` sets the privacy setting itself (as ``PUT /privacy``):
        ``false`` applies before the other fields are written, ``true`` after them."""
        check_user_id(user_id)
        fields = ProfileUpdate.model_validate(update.model_dump(exclude_unset=True, exclude={"opt_out"}))
        if update.opt_out is False:
            self.privacy.set_opt_out(user_id, False)
        if fields.model_fields_set or update.opt_out is None:
            self.privacy.require_persistence(user_id)
            self.profiles.merge(user_id, fields)
        if update.opt_out:
            self.privacy.set_opt_out(user_id, True)
        return self.get_profile(user_id)

    def health(self) -> dict[str, Any]:
        report = health(self.services)
        report["checks"]["ingest-queue"] = self.ingest_queue_check()
        return report

    def close(self) -> None:
        self.stop_ingest_worker()
        self.services.close()
