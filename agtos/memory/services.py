"""The services of one process, built once: Redis connection, stores, indexes, embedder, NER, NLI,
LLM slots, the event bus and the background-work guard.

The memory pipelines (ingestion, Dreamer, lint) and the Prefect flows work on a :class:`Services`;
the API facade (:class:`agtos.memory.coordinator.MemoryCoordinator`) holds one and adds the
request-level operations on top.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agtos.config import Settings
from agtos.events import EventBus
from agtos.memory.entity_memory import EntityMemory
from agtos.memory.privacy_controls import Privacy
from agtos.memory.query_ingest import QueryIngestGate
from agtos.memory.resource_guard import ActivityTracker, GuardConfig, ResourceGuard
from agtos.memory.semantic import SemanticMemory
from agtos.memory.working import WorkingMemoryStore
from agtos.providers.embeddings import Embedder, build_embedder
from agtos.providers.llm import LLMProvider, build_llm
from agtos.storage.conclusions import ConclusionStore
from agtos.storage.dream_markers import DreamMarkers
from agtos.storage.episodes import EpisodeStore
from agtos.storage.forget_fences import ForgetFences
from agtos.storage.keys import GlobalKeys
from agtos.storage.maintenance_store import MaintenanceStore
from agtos.storage.nli_cache import NLICache
from agtos.storage.opt_outs import OptOutStore
from agtos.storage.profiles import ProfileStore
from agtos.storage.record_reads import RecordReads
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.session_journal import JournalLimits, SessionJournal
from agtos.storage.user_lock import limit_waits
from agtos.storage.users import UserDirectory
from agtos.tasks.contradiction import NLIModel, build_nli
from agtos.tasks.expansion import expand_query
from agtos.tasks.ner import build_recognizer
from agtos.tasks.summarize import build_summariser

log = logging.getLogger(__name__)


class Services:
    """Everything the pipelines share; ``llm``, ``connector`` and ``embedder`` may be injected (tests)."""

    def __init__(
        self,
        settings: Settings,
        connector: RedisConnector | None = None,
        llm: LLMProvider | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        limit_waits(settings.lock_wait_max_s)  # process-wide: every UserLock's wait
        self.keys = keys = GlobalKeys(settings.key_prefix)
        self.connector = conn = connector or RedisConnector.from_settings(settings)
        # LLM slots: summarise (working memory, episodes, entity relations), consolidation, dialectic, maintenance
        self.llm = llm if llm is not None else build_llm(settings.llm_slot("summarize"))
        self.consolidation_llm = build_llm(settings.llm_slot("consolidation"))
        self.dialectic_llm = build_llm(settings.llm_slot("dialectic"))
        self.maintenance_llm = build_llm(settings.llm_slot("maintenance"))
        self.summariser = build_summariser(self.llm)
        self.working = WorkingMemoryStore(settings.working, self.summariser)
        # stores (all Redis access lives in agtos.storage)
        self.episodes = EpisodeStore(conn, keys, settings.episode_ttl_seconds)
        self.profiles = ProfileStore(conn, keys)
        self.maintenance = MaintenanceStore(conn, keys)
        self.nli_cache = NLICache(conn, keys)
        limits = JournalLimits(
            settings.session_max_turns, settings.session_max_bytes, settings.user_max_sessions, settings.user_max_turns
        )
        self.journal = SessionJournal(conn, keys, settings.session_journal_ttl_seconds, limits)
        self.opt_outs = OptOutStore(conn, keys)
        self.dream_markers = DreamMarkers(conn, keys)
        self.users = UserDirectory(conn, keys)
        self.fences = ForgetFences(conn, keys)
        self.reads = RecordReads(conn, keys)
        self.query_ingest = QueryIngestGate(
            conn,
            keys,
            threshold=settings.query_ingest_threshold,
            max_per_session=settings.query_ingest_max_per_session,
            ttl_s=settings.session_journal_ttl_seconds,
        )
        # indexes and models
        self.semantic = SemanticMemory(
            conn,
            keys,
            self.episodes,
            (lambda: embedder) if embedder is not None else self._build_embedder,
            default_mode=settings.search_mode,
            similarity_threshold=settings.similarity_threshold,
            hnsw_build_threads=settings.hnsw_build_threads,
            hnsw_ef_search=settings.hnsw_ef_search,
            expander=self._build_expander(),
        )
        # NER of the ingestion pipeline (loads lazily): spaCy, or AGTOS_NER_MODEL_DIR's transformers model
        self.recognizer: Any = build_recognizer(eager=False, model_dir=settings.ner_model_dir)
        self.entities = EntityMemory(
            conn, keys, self.semantic, self.llm, request_wait_s=settings.embedding.request_timeout_s
        )
        self._conclusions: ConclusionStore | None = None
        self._nli_model: NLIModel | None = None
        # in-process coordination
        self.events = EventBus()
        self.activity = ActivityTracker()
        self.guard = ResourceGuard(
            settings.llm_slot("consolidation"),
            config=GuardConfig.from_settings(settings),
            activity=self.activity,
        )
        self.privacy = Privacy(self)

    @property
    def conclusions(self) -> ConclusionStore:
        """Conclusion records + their semantic index (created on first use: it sizes to the embedder)."""
        if self._conclusions is None:
            self._conclusions = ConclusionStore(self.connector, self.keys, self.semantic.store("conclusion"))
        return self._conclusions

    @property
    def nli_model(self) -> NLIModel | None:
        """Stage 2 of contradiction detection (None when AGTOS_NLI_ENABLED=false)."""
        cfg = self.settings.maintenance
        if cfg.nli_enabled and self._nli_model is None:
            self._nli_model = build_nli(True, cfg.nli_model_dir)
        return self._nli_model if cfg.nli_enabled else None

    @property
    def loaded_nli_model(self) -> NLIModel | None:
        """The NLI model if it was built already (``/health`` reports it without loading one)."""
        return self._nli_model

    def _build_expander(self) -> Callable[[str], list[str]] | None:
        """Query expansion through the ``expansion`` LLM slot, when switched on and configured."""
        if not self.settings.query_expansion:
            return None
        llm = build_llm(self.settings.llm_slot("expansion"))
        if llm is None:
            log.warning("AGTOS_MEMORY_QUERY_EXPANSION is on but no LLM is configured; expansion disabled")
            return None
        return lambda query: expand_query(llm, query)

    def warm_models(self) -> None:
        """Load the ingestion models now (the embedder and NER), so the first job does not pay for it
        (an ``agtos worker`` does this before it takes jobs: a lone client's end waits only its own
        ingestion). A model that cannot load is left to fail, or fall back, on first use as before."""
        try:
            self.semantic.embedder.embed(["warm-up"])
        except Exception as exc:  # reported again, with its reason, by the first real job
            log.warning("embedder not loaded at start: %s", exc)
        self.recognizer.recognize_many(["Ada met Bob in Paris."])

    def _build_embedder(self) -> Embedder:
        return build_embedder(config=self.settings.embedding, derived_dir=self.settings.data_dir / "models")

    def close(self) -> None:
        """Close the Redis connections and release the embedding model (a process that builds many
        services, as the test suite does, would otherwise hold a model per closed one until a full
        garbage collection)."""
        self.connector.close()
        self.semantic.release_embedder()
