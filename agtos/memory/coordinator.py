"""MemoryCoordinator: the API and CLI facade over the services of one process.

It validates ids, applies the privacy rules and composes the memory services (live sessions,
recall, ingestion, Dreamer, lint and health in their modules). The Prefect flows never see it:
they work on :class:`agtos.memory.services.Services`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agtos.config import Settings
from agtos.memory import memory_crud, recall
from agtos.memory.conclusion_lock import conclusions_held, delete_conclusion
from agtos.memory.conversation_ingest import ingest_conversations
from agtos.memory.dream_retry import dream_now
from agtos.memory.dreamer import DreamerScheduler
from agtos.memory.dreamer_pipeline import DreamReport
from agtos.memory.episodic import session_episode_id
from agtos.memory.health_checks import health
from agtos.memory.ingest_worker import IngestWorker, SessionJob, existing_episodes
from agtos.memory.ingestion_pipeline import OPTED_OUT, IngestionReport, run_ingestion
from agtos.memory.live_sessions import SESSION_ENDED, LiveSessions, LoneRequest, SessionEndResult
from agtos.memory.privacy_controls import NotFoundError
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
from agtos.storage.keys import check_record_id, check_user_id
from agtos.storage.redis_conn import RedisConnector


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
        # the live sessions: journal, working memory, session ends (inline or through the durable queue)
        self.sessions = LiveSessions(s)
        self.ingest_queue = self.sessions.ingest_queue

    @property
    def conclusions(self) -> ConclusionStore:
        return self.services.conclusions

    # -- live sessions (agtos.memory.live_sessions) -------------------------------------
    @property
    def worker(self) -> IngestWorker | None:
        """This process's ingestion worker thread, if one runs."""
        return self.sessions.worker

    def add_turn(self, user_id: str, session_id: str, turn: Turn) -> WorkingMemory:
        return self.sessions.add_turns(user_id, session_id, [turn])

    def add_turns(
        self, user_id: str, session_id: str, turns: list[Turn], idempotency_key: str | None = None
    ) -> WorkingMemory:
        return self.sessions.add_turns(user_id, session_id, turns, idempotency_key)

    def session(self, user_id: str, session_id: str) -> WorkingMemory | None:
        return self.sessions.session(user_id, session_id)

    def end_session(
        self, user_id: str, session_id: str, wait_s: float = 0.0, lone: LoneRequest | None = None
    ) -> SessionEndResult:
        return self.sessions.end_session(user_id, session_id, wait_s, lone)

    def end_idle_sessions(self, idle_s: float | None = None) -> list[SessionEndResult]:
        return self.sessions.end_idle_sessions(idle_s)

    def ingest_job(self, job: SessionJob) -> None:
        self.sessions.ingest_job(job)

    def ingest_worker(self) -> IngestWorker:
        return self.sessions.ingest_worker()

    def start_ingest_worker(self) -> IngestWorker:
        return self.sessions.start_ingest_worker()

    def stop_ingest_worker(self, timeout_s: float = 30.0) -> None:
        self.sessions.stop_ingest_worker(timeout_s)

    def ingest_queue_check(self) -> dict[str, Any]:
        return self.sessions.ingest_queue_check()

    # -- episodes, ingestion ------------------------------------------------------------
    def list_episodes(self, user_id: str, limit: int = 20) -> list[Episode]:
        return self.episodes.recent(check_user_id(user_id), limit)

    def ingest(self, items: list[IngestItem]) -> IngestionReport:
        """Run the ingestion steps in-process (the Prefect flow runs the same steps as tasks)."""
        allowed = [i for i in items if not self.privacy.is_opted_out(i.user_id, fresh=True)]
        episodes = {session_episode_id(i.user_id, i.session_id): i for i in allowed}
        before = existing_episodes(self.services, [(i.user_id, e) for e, i in episodes.items()])
        report = run_ingestion(self.services, allowed) if allowed else IngestionReport()
        self._unstore_opted_out(report, episodes, before)
        report.received = len(items)
        report.skipped += [{"sessionId": i.session_id, "reason": OPTED_OUT} for i in items if i not in allowed]
        return report

    def _unstore_opted_out(self, report: IngestionReport, episodes: dict[str, IngestItem], before: set[str]) -> None:
        """Users who opted out while the run wrote (from any API process): the episodes it added for them
        are forgotten again, with what was learnt from them alone, and count as skipped (README: an
        opted-out user keeps working memory only). One stored ``before`` the run stays: the run wrote it
        only while they had not opted out yet (an opt-out landing first leaves it as it was,
        :func:`agtos.memory.ingestion_pipeline.index_batch`), so it is what they had when opting out."""
        users = {episodes[e].user_id for e in report.episode_ids if e in episodes}
        opted = {u for u in users if self.privacy.is_opted_out(u, fresh=True)}
        dropped = [e for e in report.episode_ids if e in episodes and episodes[e].user_id in opted and e not in before]
        for episode_id in dropped:
            with contextlib.suppress(NotFoundError):
                self.privacy.forget_item(episodes[episode_id].user_id, "episode", episode_id)
        report.episode_ids = [e for e in report.episode_ids if e not in dropped]
        report.skipped += [{"sessionId": episodes[e].session_id, "reason": OPTED_OUT} for e in dropped]

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
    def search(
        self, user_id: str, query: str, limit: int = 10, mode: str | None = None
    ) -> tuple[list[SearchHit], str | None]:
        """:meth:`search_episodes`, with why the search was degraded (``None`` when it ran as asked).
        A quiet user's queued ends are stored first (:mod:`agtos.memory.read_catchup`), as for context and ask."""
        self.sessions.read_catchup.before_read(check_user_id(user_id))
        return recall.search(self.services, user_id, query, limit, mode)

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
        self.sessions.read_catchup.before_read(check_user_id(user_id))
        wm = self.session(user_id, session_id) if session_id else None
        return recall.build_context(self.services, user_id, query, wm, budget_tokens, limit)

    def ask(self, user_id: str, question: str, limit: int = 5) -> dict[str, Any]:
        """Dialectic: answer a question about the user from profile, conclusions, memories, episodes."""
        self.sessions.read_catchup.before_read(check_user_id(user_id))
        return recall.ask(self.services, user_id, question, limit)

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

    def source_session_ids(self, user_id: str, sources: list[list[str]]) -> list[list[str]]:
        """For each list of source episode ids, the sessions they were said in (one batched read for all;
        gone or imported episodes give none), in the episodes' order, without repeats."""
        found = self.episodes.session_ids(check_user_id(user_id), (e for ids in sources for e in ids))
        return [list(dict.fromkeys(found[e] for e in ids if e in found)) for ids in sources]

    # -- conclusions, Dreamer, lint, query-as-ingest ------------------------------------
    def list_conclusions(self, user_id: str, limit: int = 50, kind: str | None = None) -> list[Conclusion]:
        return self.conclusions.recent(check_user_id(user_id), limit, kind)

    def delete_conclusion(self, user_id: str, conclusion_id: str) -> bool:
        check_record_id(conclusion_id, "conclusion id")
        return delete_conclusion(self.services, check_user_id(user_id), conclusion_id)

    def dream(self, user_id: str) -> DreamReport:
        """Run the Dreamer for a user now (manual trigger; the session-end path is automatic); a run that
        succeeds clears the user's pending mark it covers (:func:`agtos.memory.dream_retry.dream_now`)."""
        return dream_now(self.services, check_user_id(user_id))

    def maintain(self, user_id: str) -> MaintenanceReport:
        """One lint sweep for a user, gated by the ResourceGuard (see memory/lint_pipeline.py)."""
        from agtos.memory.lint_pipeline import maintain  # Polars and DuckDB load with the first sweep

        self.privacy.require_persistence(check_user_id(user_id))
        return maintain(self.services, user_id)

    def maintain_run(
        self, run: MaintenanceRun, sleep: Callable[[float], None] = time.sleep, since_ms: int | None = None
    ) -> MaintenanceRun:
        """Carry out a run requested over HTTP (queued by the API; its state saved at each step);
        ``sleep`` waits between the ResourceGuard's checks while it defers; ``since_ms`` as
        :func:`agtos.memory.lint_pipeline.maintain_run`'s."""
        from agtos.memory.lint_pipeline import INLINE_STEPS, maintain_run

        return maintain_run(self.services, run, INLINE_STEPS, sleep, since_ms)

    def queued_run(self, user_id: str, run_id: str) -> tuple[MaintenanceRun | None, int]:
        """A queued run's record (None: forgotten since) and when it was read (the Redis clock)."""
        from agtos.memory.lint_pipeline import queued_run

        return queued_run(self.services, user_id, run_id)

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
            # the dedup window runs from the save's end: a first save slower than the window (a cold embedder)
            # would otherwise let the same response, sent again at once, be ingested again
            self.services.query_ingest.mark_interaction_saved(user_id, session_id)
        return decision.response(episode)

    # -- profile, health --------------------------------------------------------------
    def get_profile(self, user_id: str) -> UserProfile:
        """The stored profile; its ``opt_out`` is the privacy setting (``/privacy``)."""
        profile = self.profiles.get(check_user_id(user_id))
        return profile.model_copy(update={"opt_out": self.privacy.opt_out_setting(user_id)})  # read now, no cache

    def update_profile(self, user_id: str, update: ProfileUpdate) -> UserProfile:
        """Merge the fields sent. ``opt_out`` sets the privacy setting itself (as ``PUT /privacy``):
        ``false`` applies before the other fields are written, ``true`` after them."""
        check_user_id(user_id)
        fields = ProfileUpdate.model_validate(update.model_dump(exclude_unset=True, exclude={"opt_out"}))
        if update.opt_out is False:
            self.privacy.set_opt_out(user_id, False)
        if fields.model_fields_set or update.opt_out is None:
            self.privacy.require_persistence(user_id)
            with conclusions_held(self.services, user_id):  # a profile rebuild between its read and write undid it
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
