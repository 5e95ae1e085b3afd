"""MemoryCoordinator: the one facade over working, episodic and (later) semantic memory."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agtos.config import Settings
from agtos.events import EventBus
from agtos.flows.dreamer import DreamReport, run_dreamer
from agtos.memory.dreamer import DreamerScheduler
from agtos.memory.entities import EntityMemory
from agtos.memory.episodic import build_episode, segment_key, session_episode_id
from agtos.memory.privacy import Privacy
from agtos.memory.query_ingest import QueryIngestGate
from agtos.memory.semantic import SemanticMemory
from agtos.memory.working import WorkingMemory, WorkingMemoryStore
from agtos.providers.embeddings import Embedder, EmbeddingError, build_embedder
from agtos.providers.llm import LLMError, LLMProvider, build_llm
from agtos.schemas import (
    Conclusion,
    Episode,
    EpisodeType,
    IngestItem,
    MaintenanceReport,
    Memory,
    ProfileUpdate,
    Role,
    Turn,
    UserProfile,
)
from agtos.schemas.records import now_ms
from agtos.storage.conclusions import ConclusionStore
from agtos.storage.dream_markers import DreamMarkers
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys, check_record_id, check_user_id
from agtos.storage.maintenance import MaintenanceStore
from agtos.storage.nli_cache import NLICache
from agtos.storage.opt_outs import OptOutStore
from agtos.storage.profiles import ProfileStore
from agtos.storage.record_reads import RecordReads
from agtos.storage.redis_conn import RedisConnector, StorageUnavailable
from agtos.storage.session_journal import SessionJournal
from agtos.storage.users import UserDirectory
from agtos.tasks.context import ContextItem, assemble
from agtos.tasks.contradiction import NLIModel, build_nli
from agtos.tasks.dialectic import Evidence, extractive_answer, llm_answer
from agtos.tasks.distil import memory_kind
from agtos.tasks.expansion import expand_query
from agtos.tasks.extract import extract
from agtos.tasks.ner import build_recognizer
from agtos.tasks.ranking import display_score, rerank_by_recency
from agtos.tasks.resource_guard import ActivityTracker, GuardConfig, ResourceGuard
from agtos.tasks.summarize import build_summariser, extractive_summary
from agtos.tasks.text import content_words

if TYPE_CHECKING:
    from agtos.flows.ingestion import IngestionReport

log = logging.getLogger(__name__)

SESSION_ENDED = "sessionEnded"
MAINTENANCE_MAX_AGE_MS = 48 * 3600 * 1000
_PROBES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="health-probe")


@dataclass(frozen=True)
class SessionEndResult:
    session_id: str
    saved: bool
    reason: str
    episode: Episode | None

    def public(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "saved": self.saved,
            "reason": self.reason,
            "episode": self.episode.public() if self.episode else None,
        }


@dataclass(frozen=True)
class SearchHit:
    episode: Episode
    score: float
    match_type: str

    @property
    def timestamp(self) -> int:
        return self.episode.timestamp

    def public(self) -> dict[str, Any]:
        return {**self.episode.public(), "score": self.score, "matchType": self.match_type}


class MemoryCoordinator:
    """Owns the tiers of one service process; the API and CLI call only this."""

    def __init__(
        self,
        settings: Settings,
        connector: RedisConnector | None = None,
        llm: LLMProvider | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.keys = GlobalKeys(settings.key_prefix)
        self.connector = connector or RedisConnector(settings.redis_url, settings.data_dir, settings.redis_timeout_s)
        self.llm = llm if llm is not None else build_llm(settings.llm_slot("summarize"))
        self.summariser = build_summariser(self.llm)
        self.working = WorkingMemoryStore(settings.working, self.summariser)
        self.episodes = EpisodeStore(self.connector, self.keys, settings.episode_ttl_seconds)
        self.profiles = ProfileStore(self.connector, self.keys)
        self.events = EventBus()
        self.semantic = SemanticMemory(
            self.connector,
            self.keys,
            self.episodes,
            (lambda: embedder) if embedder is not None else lambda: self._build_embedder(),
            default_mode=settings.search_mode,
            similarity_threshold=settings.similarity_threshold,
            hnsw_build_threads=settings.hnsw_build_threads,
            hnsw_ef_search=settings.hnsw_ef_search,
            expander=self._build_expander(),
        )
        self.recognizer: Any = build_recognizer(eager=False)  # NER of the ingestion flow (loads lazily)
        self.entities = EntityMemory(self.connector, self.keys, self.semantic, self.llm)
        self.activity = ActivityTracker()
        self.guard = ResourceGuard(
            settings.llm_slot("consolidation"),
            config=GuardConfig.from_settings(settings),
            activity=self.activity,
        )
        self.consolidation_llm = build_llm(settings.llm_slot("consolidation"))
        self.dialectic_llm = build_llm(settings.llm_slot("dialectic"))
        self._conclusions: ConclusionStore | None = None
        self.maintenance = MaintenanceStore(self.connector, self.keys)
        self.privacy = Privacy(self)
        self.maintenance_llm = build_llm(settings.llm_slot("maintenance"))
        self.nli_cache = NLICache(self.connector, self.keys)
        self.journal = SessionJournal(self.connector, self.keys, settings.session_journal_ttl_seconds)
        self.opt_outs = OptOutStore(self.connector, self.keys)
        self.dream_markers = DreamMarkers(self.connector, self.keys)
        self.users = UserDirectory(self.connector, self.keys)
        self.reads = RecordReads(self.connector, self.keys)
        self._nli_model: NLIModel | None = None
        self.dreamer = DreamerScheduler(self, settings.dreamer_retries, settings.dreamer_retry_delay_s)
        self.events.subscribe(SESSION_ENDED, self.dreamer.on_session_ended)
        self.query_ingest = QueryIngestGate(
            self.connector,
            self.keys,
            threshold=settings.query_ingest_threshold,
            max_per_session=settings.query_ingest_max_per_session,
            ttl_s=settings.session_journal_ttl_seconds,
        )

    @property
    def conclusions(self) -> ConclusionStore:
        """Conclusion records + their semantic index (created on first use: it sizes to the embedder)."""
        if self._conclusions is None:
            self._conclusions = ConclusionStore(self.connector, self.keys, self.semantic.store("conclusion"))
        return self._conclusions

    def _build_expander(self) -> Callable[[str], list[str]] | None:
        """Query expansion through the ``expansion`` LLM slot, when switched on and configured."""
        if not self.settings.query_expansion:
            return None
        llm = build_llm(self.settings.llm_slot("expansion"))
        if llm is None:
            log.warning("AGTOS_MEMORY_QUERY_EXPANSION is on but no LLM is configured; expansion disabled")
            return None
        return lambda query: expand_query(llm, query)

    def _build_embedder(self) -> Embedder:
        return build_embedder(config=self.settings.embedding, derived_dir=self.settings.data_dir / "models")

    # -- working memory ---------------------------------------------------------------
    def add_turn(self, user_id: str, session_id: str, turn: Turn) -> WorkingMemory:
        """Append a turn to the session's working memory and journal it to Redis if reachable."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        wm = self.working.get_or_create(user_id, session_id)
        persist = not self.privacy.is_opted_out(user_id)
        if not wm.messages and persist:
            self._restore_from_journal(user_id, session_id, wm)
        wm.add(turn)
        self.activity.turn(user_id, session_id)
        if persist:
            self._journal(user_id, session_id, turn)
        return wm

    def session(self, user_id: str, session_id: str) -> WorkingMemory | None:
        """The live session, replayed from its Redis journal when this process does not hold it
        (after a restart, or on another API worker); None when there is neither."""
        check_record_id(session_id, "session id")
        wm = self.working.get(check_user_id(user_id), session_id)
        if wm is not None or self.privacy.is_opted_out(user_id):
            return wm
        turns = self._journal_turns(user_id, session_id)
        if not turns:
            return None
        wm = self.working.get_or_create(user_id, session_id)
        if not wm.messages:  # (a concurrent add_turn may have replayed it meanwhile)
            for turn in turns:
                wm.add(turn)
        return wm

    def _journal(self, user_id: str, session_id: str, turn: Turn) -> None:
        try:
            self.journal.append(user_id, session_id, turn)
        except StorageUnavailable:
            log.warning("session journal not written (Redis unavailable); turn kept in working memory")

    def _journal_turns(self, user_id: str, session_id: str) -> list[Turn]:
        try:
            return self.journal.turns(user_id, session_id)
        except StorageUnavailable:
            return []

    def _restore_from_journal(self, user_id: str, session_id: str, wm: WorkingMemory) -> None:
        """After a restart (or on another API worker) a session continues from its journal."""
        for turn in self._journal_turns(user_id, session_id):
            wm.add(turn)

    # -- episodic memory --------------------------------------------------------------
    def end_session(self, user_id: str, session_id: str) -> SessionEndResult:
        """Summarise the session, apply the save heuristics and store the episode (idempotent)."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        if self.privacy.is_opted_out(user_id):
            had_turns = self.working.get(user_id, session_id) is not None
            self.working.drop(user_id, session_id)
            self.activity.session_ended(user_id, session_id)
            reason = "user opted out of persistence" if had_turns else "session has no turns"
            return SessionEndResult(session_id, False, reason, None)
        turns = self._journal_turns(user_id, session_id)
        if not turns:
            wm = self.working.get(user_id, session_id)
            turns = list(wm.messages) if wm else []
        if not turns:
            self.activity.session_ended(user_id, session_id)
            return SessionEndResult(session_id, False, "session has no turns", None)
        self.activity.session_ended(user_id, session_id)
        draft = build_episode(user_id, session_id, turns, self.summariser, segment_key(turns))  # reuse: new episode
        if not draft.decision.save:
            self._clear_session(user_id, session_id)
            return SessionEndResult(session_id, False, draft.decision.reason, None)
        self.ingest([IngestItem(user_id=user_id, session_id=session_id, episode=draft.episode)])
        self.query_ingest.mark_interaction_saved(user_id, session_id)
        self._clear_session(user_id, session_id)
        payload = {"user_id": user_id, "session_id": session_id, "episode_id": draft.episode.id}
        self.dreamer.on_session_ended(payload)  # the direct call; subscribers of the event below too
        self.events.emit(SESSION_ENDED, payload)  # (the Dreamer's Redis marker makes it run once)
        return SessionEndResult(session_id, True, draft.decision.reason, draft.episode)

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
        self.working.drop(user_id, session_id)
        self.journal.clear(user_id, session_id)

    def list_episodes(self, user_id: str, limit: int = 20) -> list[Episode]:
        return self.episodes.recent(check_user_id(user_id), limit)

    def ingest(self, items: list[IngestItem]) -> IngestionReport:
        """Run the ingestion steps in-process (the Prefect flow runs the same steps as tasks)."""
        from agtos.flows.ingestion import IngestionReport, run_ingestion

        allowed = [i for i in items if not self.privacy.is_opted_out(i.user_id)]
        report = run_ingestion(self, allowed) if allowed else IngestionReport()
        report.received = len(items)
        report.skipped += [
            {"sessionId": i.session_id, "reason": "user opted out of persistence"} for i in items if i not in allowed
        ]
        return report

    def search_episodes(self, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[SearchHit]:
        """Episodes by hybrid (default), vector or BM25 search, best first.

        A wider candidate pool is re-ranked by relevance × recency (see ``rerank_by_recency``),
        so when a later session restates or updates a fact it outranks the superseded one
        without burying strong older matches.
        """
        found = self.semantic.search("episode", check_user_id(user_id), query, min(100, limit * 2), mode)
        hits = [
            SearchHit(
                Episode.model_validate_json(r.payload),
                display_score(r.score, found.mode, found.max_score),
                r.match_type,
            )
            for r in found.results
            if r.payload is not None
        ]
        return rerank_by_recency(hits)[:limit]

    def search_memories(self, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[Memory]:
        """Semantic memories (facts, preferences) relevant to ``query``, best first."""
        found = self.semantic.search("memory", check_user_id(user_id), query, limit, mode)
        return [Memory.model_validate_json(r.payload) for r in found.results if r.payload is not None]

    @property
    def nli_model(self) -> NLIModel | None:
        """Stage 2 of contradiction detection (None when AGTOS_NLI_ENABLED=false)."""
        cfg = self.settings.maintenance
        if cfg.nli_enabled and self._nli_model is None:
            self._nli_model = build_nli(True, cfg.nli_model_dir)
        return self._nli_model if cfg.nli_enabled else None

    def import_sources(
        self, user_id: str, sources: list[str] | None = None, home: Path | None = None
    ) -> dict[str, Any]:
        """Import other tools' chat history and memory files as episodes and memories (idempotent)."""
        from agtos.importers import collect

        self.privacy.require_persistence(check_user_id(user_id))
        found = collect(home or self.settings.import_home, sources)
        items = [IngestItem(user_id=user_id, session_id=s.session_key, turns=s.turns) for s in found.sessions]
        existing = self.episodes.existing_ids(user_id, [session_episode_id(user_id, i.session_id) for i in items])
        report = self.ingest(items) if items else None
        memories = [
            Memory(id=m.key, user_id=user_id, text=m.text[:20_000], kind=memory_kind(m.text)) for m in found.memories
        ]
        known_memories = set(self.semantic.records("memory", user_id, [m.id for m in memories]))
        if memories:
            self.semantic.store_batch([], memories, self.semantic.embed_or_none([m.text for m in memories]))
        stored = report.episode_ids if report else []
        return {
            "sessions": len(items),
            "episodesAdded": len([i for i in stored if i not in existing]),
            "episodesUpdated": len([i for i in stored if i in existing]),
            "skipped": report.skipped if report else [],
            "memoriesAdded": len([m for m in memories if m.id not in known_memories]),
            "warnings": found.warnings,
        }

    def known_users(self) -> list[str]:
        """Every user with stored memory (the nightly lint walks them)."""
        return self.users.known()

    def maintain(self, user_id: str) -> MaintenanceReport:
        """One lint sweep for a user, gated by the ResourceGuard (see flows/lint.py)."""
        from agtos.flows.lint import maintain

        self.privacy.require_persistence(check_user_id(user_id))
        return maintain(self, user_id)

    # -- conclusions, dialectic, query-as-ingest -------------------------------------
    def list_conclusions(self, user_id: str, limit: int = 50, kind: str | None = None) -> list[Conclusion]:
        return self.conclusions.recent(check_user_id(user_id), limit, kind)

    def delete_conclusion(self, user_id: str, conclusion_id: str) -> bool:
        check_record_id(conclusion_id, "conclusion id")
        return self.conclusions.delete(check_user_id(user_id), conclusion_id)

    def dream(self, user_id: str) -> DreamReport:
        """Run the Dreamer for a user now (manual trigger; the session-end path is automatic)."""
        return run_dreamer(self, check_user_id(user_id))

    def ask(self, user_id: str, question: str, limit: int = 5) -> dict[str, Any]:
        """Dialectic: answer a question about the user from profile, conclusions, memories, episodes."""
        check_user_id(user_id)
        evidence = [Evidence(i.id, "profile", i.text, i.relevance) for i in self._profile_items(user_id, question)]
        for namespace, kind in (("conclusion", "conclusion"), ("memory", "memory")):
            found = self.semantic.search(namespace, user_id, question, limit)
            for hit in found.results:
                if hit.payload is not None:
                    text = json.loads(hit.payload)["text"]
                    evidence.append(Evidence(hit.id, kind, text, display_score(hit.score, found.mode, found.max_score)))
        evidence += [
            Evidence(h.episode.id, "episode", h.episode.summary, h.score)
            for h in self.search_episodes(user_id, question, limit)
        ]
        source = "extractive"
        answer = extractive_answer(question, evidence)
        if self.dialectic_llm is not None:
            try:
                answer, source = (
                    llm_answer(self.dialectic_llm, question, evidence),
                    f"llm:{self.dialectic_llm.name}",
                )
            except LLMError:
                log.warning("dialectic LLM failed; answering extractively", exc_info=True)
        return {
            "question": question,
            "answer": answer,
            "source": source,
            "evidence": [e.public() for e in evidence],
            "evidenceIds": list(dict.fromkeys(e.id for e in evidence)),
        }

    def ingest_response(
        self,
        user_id: str,
        session_id: str,
        response: str,
        query: str | None = None,
        tool_calls: int = 0,
        reasoning_steps: int | None = None,
    ) -> dict[str, Any]:
        """Query-as-Ingest: keep a valuable agent response as a ``response_ingest`` episode."""
        check_user_id(user_id)
        check_record_id(session_id, "session id")
        self.privacy.require_persistence(user_id)
        decision = self.query_ingest.evaluate(
            user_id, session_id, response, tool_calls=tool_calls, reasoning_steps=reasoning_steps
        )
        episode = None
        if decision.ingest:
            digest = hashlib.sha256(f"{user_id}\x00{session_id}\x00{response}".encode()).hexdigest()[:16]
            found = extract([Turn(role=Role.assistant, content=response)])
            summary = (f"Asked: {query.strip()[:300]}. " if query else "") + extractive_summary(
                [Turn(role=Role.assistant, content=response)]
            )
            episode = Episode(
                id=f"ep-r{digest}",
                user_id=user_id,
                session_id=session_id,
                summary=summary[:20_000],
                keywords=found.keywords,
                topic=found.topic,
                importance=min(1.0, decision.score.score / 12),
                type=EpisodeType.response_ingest,
            )
            self.ingest([IngestItem(user_id=user_id, session_id=session_id, episode=episode)])
        return {**decision.public(), "episode": episode.public() if episode else None}

    # -- context assembly -------------------------------------------------------------
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
        items: list[ContextItem] = []
        wm = self.session(user_id, session_id) if session_id else None
        if wm is not None:
            items += [
                ContextItem("working", f"summary-{i}", t.content, 0.9, t.timestamp)
                for i, t in enumerate(wm.messages)
                if t.is_summary
            ]
        available = True
        try:
            items += self._profile_items(user_id, query)
            memories = self.semantic.search("memory", user_id, query, limit)
            for hit in memories.results:
                if hit.payload is not None:
                    memory = Memory.model_validate_json(hit.payload)
                    relevance = (
                        hit.similarity
                        if hit.similarity is not None
                        else display_score(hit.score, memories.mode, memories.max_score)
                    )
                    items.append(ContextItem("semantic", memory.id, memory.text, relevance, memory.created_at))
            for ep_hit in self.search_episodes(user_id, query, limit):
                ep = ep_hit.episode
                items.append(ContextItem("episodic", ep.id, ep.summary, ep_hit.score, ep.timestamp))
        except StorageUnavailable:
            available = False
        chosen, text, used = assemble(items, budget_tokens, now_ms())
        return {
            "context": text,
            "tokens": used,
            "items": [{"tier": i.tier, "id": i.id, "text": i.text, "relevance": round(i.relevance, 4)} for i in chosen],
            "available": available,
        }

    def _profile_items(self, user_id: str, query: str) -> list[ContextItem]:
        profile = self.profiles.get(user_id)
        query_terms = set(content_words(query))
        lines = [f"User's name is {profile.name}"] if profile.name else []
        if profile.communication_style:
            lines.append(f"Communication style: {profile.communication_style}")
        lines += profile.preferences + profile.patterns + profile.facts
        return [
            ContextItem(
                "profile",
                f"profile-{i}",
                line,
                0.9 if query_terms & set(content_words(line)) else 0.5,
                profile.updated_at,
            )
            for i, line in enumerate(lines)
        ]

    # -- profile ----------------------------------------------------------------------
    def get_profile(self, user_id: str) -> UserProfile:
        return self.profiles.get(check_user_id(user_id))

    def update_profile(self, user_id: str, update: ProfileUpdate) -> UserProfile:
        self.privacy.require_persistence(check_user_id(user_id))
        return self.profiles.merge(user_id, update)

    # -- health -----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        redis_info = self.connector.describe()
        embedder_ok = self.semantic.embedder_available()
        semantic: dict[str, Any] = {
            "available": redis_info["available"] and embedder_ok,
            "searchMode": self.settings.search_mode if embedder_ok else "bm25",
            "embedder": self.semantic.embedder.name if embedder_ok else None,
        }
        if not embedder_ok:
            semantic["degradedTo"] = "keyword search (embedder unavailable)"
            semantic["error"] = self.semantic.embedder_error
        tiers = {
            "working": {"available": True, "sessions": len(self.working.active_sessions())},
            "episodic": {"available": redis_info["available"], "redis": redis_info},
            "semantic": semantic,
        }
        degraded = [name for name, tier in tiers.items() if not tier["available"]]
        return {
            "status": "degraded" if degraded else "ok",
            "degraded": degraded,
            "tiers": tiers,
            "checks": {
                "memory-maintenance": self._maintenance_check(),
                "memory-semantic": self._semantic_check(embedder_ok),
                "resource-guard": self._guard_info(),
            },
            "llm": {"provider": self.llm.name if self.llm else "builtin", "summariser": self.summariser.name},
        }

    def _maintenance_check(self) -> dict[str, Any]:
        """Unhealthy when no lint sweep ran in the last 48 h (counters live in Redis)."""
        if not self.settings.maintenance.enabled:
            return {"healthy": True, "enabled": False, "reason": "maintenance disabled by configuration"}
        try:
            status = self.maintenance.status()
        except StorageUnavailable as exc:
            return {"healthy": False, "reason": f"Redis unavailable: {exc}"}
        last = status["lastMaintenanceAt"]
        healthy = last is not None and now_ms() - last <= MAINTENANCE_MAX_AGE_MS
        reason = None if healthy else ("no sweep yet" if last is None else "no sweep in the last 48 h")
        return {"healthy": healthy, **status, "reason": reason}

    def _semantic_check(self, embedder_ok: bool) -> dict[str, Any]:
        """Probe the vector and keyword indexes loaded here (doc count, size) within 1 s."""
        if not embedder_ok:
            return {"healthy": False, "reason": "embedder unavailable"}

        def probe() -> dict[str, Any]:
            store = self.semantic.store("episode")
            stats, keyword = store.vectors.stats(), store.bm25.stats()
            return {
                "backend": stats["backend"],
                "docs": stats["docs"],
                "memoryBytes": stats["memoryBytes"],
                "keywordIndex": {k: keyword[k] for k in ("backend", "docs", "memoryBytes")},
            }

        future = _PROBES.submit(probe)
        try:
            return {"healthy": True, **future.result(timeout=1.0)}
        except FutureTimeout:
            return {"healthy": False, "reason": "vector index probe timed out (1 s)"}
        except (StorageUnavailable, EmbeddingError) as exc:
            return {"healthy": False, "reason": str(exc)}

    def _guard_info(self) -> dict[str, Any]:
        """Informational: why background work would run or wait right now."""
        last_end = self.activity.last_session_ended_at()
        return {
            "informational": True,
            "policy": self.guard.config.policy.value,
            "activeSessions": self.activity.active_session_count(),
            "secondsSinceLastSessionEnd": None if last_end is None else round(time.time() - last_end, 1),
        }

    def close(self) -> None:
        self.connector.close()
