"""Health of one process: the memory tiers, what degraded, the maintenance, index and guard checks, and
which model providers are active."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from agtos.config import LLM_SLOT_NAMES
from agtos.memory.reindex import stale_line
from agtos.providers.embedding_base import CircuitBreaker, EmbeddingTimeout
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas.records import now_ms
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import StorageUnavailable
from agtos.tasks.url_credentials import mask_urls

if TYPE_CHECKING:
    from agtos.memory.semantic import SemanticMemory
    from agtos.memory.services import Services
    from agtos.storage.ingest_queue import IngestQueue

log = logging.getLogger(__name__)

MAINTENANCE_MAX_AGE_MS = 48 * 3600 * 1000
REDIS_DOWN = "Redis unreachable"
EMBEDDER_DOWN = "embedder unavailable (the server log has the reason)"  # its error names the service's URL
EMBEDDER_SILENT = "embedder did not answer within {:g} s"
EMBEDDER_BREAKER_OPEN = "embedder failed just now: calls fail at once until its cool-down ends (circuit breaker open)"
EMBEDDER_PROBE_TIMEOUT_S = 2.0  # the longest /health waits on a remote embedder
EMBEDDER_PROBE_TTL_S = 15.0  # a remote embedder's answer (or silence) is reused this long
LOCAL_EMBEDDERS = ("onnx", "local")  # in process: loaded means available, never probed
_PROBES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="health-probe")


def health(rt: Services) -> dict[str, Any]:
    """Tiers (working, episodic, semantic) with what degraded, plus the maintenance, index and guard checks."""
    redis_info = _redis_info(rt)
    embedder_problem = embedder_status(rt)
    embedder_ok = embedder_problem is None
    semantic: dict[str, Any] = {
        "available": redis_info["available"] and embedder_ok,
        "searchMode": rt.settings.search_mode if embedder_ok else "bm25",
        "embedder": rt.semantic.embedder.name if embedder_ok else None,
        "pendingVectors": _pending_vectors(rt) if redis_info["available"] else None,
    }
    if not embedder_ok:
        semantic["degradedTo"] = "keyword search (embedder unavailable)"
        semantic["error"] = embedder_problem
    elif redis_info["available"] and (stale := _stale_vectors(rt)):
        semantic["staleVectors"] = stale
    tiers = {
        "working": {"available": True, "sessions": len(rt.working.active_sessions())},
        "episodic": {"available": redis_info["available"], "redis": redis_info},
        "semantic": semantic,
    }
    degraded = [name for name, tier in tiers.items() if not tier["available"]]
    return {
        "status": "degraded" if degraded else "ok",
        "degraded": degraded,
        "tiers": tiers,
        "checks": {
            "memory-maintenance": _maintenance_check(rt),
            "memory-semantic": _semantic_check(rt, embedder_ok),
            "resource-guard": _guard_info(rt),
        },
        "llm": {"provider": rt.llm.name if rt.llm else "builtin", "summariser": rt.summariser.name},
        "providers": providers(rt),
    }


def providers(rt: Services) -> dict[str, Any]:
    """Which model serves each LLM slot, NER and NLI, and why a configured one is not used (never loads one)."""
    built = {"summarize": rt.llm, "consolidation": rt.consolidation_llm}
    built |= {"dialectic": rt.dialectic_llm, "maintenance": rt.maintenance_llm}
    slots: dict[str, Any] = {}
    for name in LLM_SLOT_NAMES:
        llm = built.get(name)
        if llm is None:  # no provider object here (the expansion slot's lives in its closure)
            slot = rt.settings.llm_slot(name)
            slots[name] = {"provider": slot.provider if slot.provider not in ("", "none") else "builtin"}
            slots[name] |= {"model": slot.model} if slot.model else {}
        else:
            status = getattr(llm, "status", None)
            slots[name] = status() if callable(status) else {"provider": llm.name, "model": llm.model}
    recognizer = rt.recognizer
    status = getattr(recognizer, "status", None)
    ner = status() if callable(status) else {"backend": recognizer.name}
    cfg = rt.settings.maintenance
    nli: dict[str, Any] = {"backend": "disabled"} if not cfg.nli_enabled else {"modelDir": cfg.nli_model_dir}
    model = rt.loaded_nli_model
    if cfg.nli_enabled:  # null until the first lint sweep loads it
        nli |= {"backend": model.name if model else None, "error": getattr(model, "load_error", None)}
        runtime = getattr(model, "runtime_status", None)  # a transformers directory: onnxruntime or torch, and why
        nli |= runtime() if callable(runtime) else {}
    return {"llm": slots, "ner": ner, "nli": nli}


def embedder_status(rt: Services) -> str | None:
    """None when the embedder serves, else a plain reason without its URL. The bundled local model is
    asked directly (no model call); a remote one gets a bounded probe, its result cached a few seconds."""
    if rt.settings.embedding.provider in LOCAL_EMBEDDERS:
        return None if rt.semantic.embedder_available() else EMBEDDER_DOWN
    breaker = breaker_state(rt.semantic)
    if breaker == "open":  # the cached probe may predate the failures that opened it
        return EMBEDDER_BREAKER_OPEN
    with _REMOTE_LOCK:
        probe = _REMOTE.get(rt.semantic)
        if probe is None:
            probe = _REMOTE[rt.semantic] = RemoteEmbedderProbe(rt.semantic)
    return probe.status(fresh=breaker == "half-open")  # half-open: the probe may be the trial that closes it


def breaker_state(semantic: SemanticMemory) -> str:
    """``closed``, ``open`` (in its cool-down: calls fail at once) or ``half-open`` (a trial call may go)
    of the built embedder's circuit breaker; ``closed`` for one without."""
    breaker = getattr(semantic._embedder, "breaker", None)
    return breaker.state if isinstance(breaker, CircuitBreaker) else "closed"


def _pending_vectors(rt: Services) -> int | None:
    """Records stored for keyword search only, waiting for their vectors (None: Redis did not answer)."""
    try:
        return PendingVectors(rt.connector, rt.keys).count()
    except StorageUnavailable:
        return None


def _stale_vectors(rt: Services) -> str | None:
    """Users whose vectors another embedder made (:func:`agtos.memory.reindex.stale_line`)."""
    try:
        return stale_line(rt)
    except (StorageUnavailable, EmbeddingError):  # reported by the tier and the index check
        return None


class RemoteEmbedderProbe:
    """One remote embedder's health: an embed of one short text in a worker thread, at most one in
    flight, its result reused for ``ttl_s``; a caller waits at most ``timeout_s`` for it."""

    def __init__(
        self,
        semantic: SemanticMemory,
        timeout_s: float = EMBEDDER_PROBE_TIMEOUT_S,
        ttl_s: float = EMBEDDER_PROBE_TTL_S,
    ) -> None:
        self.semantic = semantic
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._future: Future[str | None] | None = None
        self._result: str | None = None
        self._checked_at = float("-inf")

    def status(self, fresh: bool = False) -> str | None:
        """The cached reason (None: answering) or, past ``ttl_s`` or ``fresh``, a new probe's, waiting at
        most ``timeout_s``."""
        with self._lock:
            if not fresh and time.monotonic() - self._checked_at < self.ttl_s:
                return self._result
            if self._future is None:
                self._future = _PROBES.submit(self._probe)
            future = self._future
        try:
            result = future.result(timeout=self.timeout_s)
        except FutureTimeout:  # still running: it finishes in the background, bounded by its own timeout
            result = EMBEDDER_SILENT.format(self.timeout_s)
            with self._lock:
                self._result, self._checked_at = result, time.monotonic()
        return result

    def _probe(self) -> str | None:
        try:
            embedder = self.semantic.embedder  # built on first use: the service's answer gives its dimension
            ping = getattr(embedder, "ping", None)
            if callable(ping):
                ping(self.timeout_s)
            result = None
        except EmbeddingError as exc:
            timed_out = isinstance(exc, EmbeddingTimeout) or isinstance(exc.__cause__, EmbeddingTimeout)
            result = EMBEDDER_SILENT.format(self.timeout_s) if timed_out else EMBEDDER_DOWN
            if self._result is None:  # once per outage: the reason, its URL credentials masked
                log.warning("embedder health probe failed: %s", mask_urls(str(exc)))
        with self._lock:
            self._result, self._checked_at, self._future = result, time.monotonic(), None
        return result


_REMOTE: weakref.WeakKeyDictionary[SemanticMemory, RemoteEmbedderProbe] = weakref.WeakKeyDictionary()
_REMOTE_LOCK = threading.Lock()


def _redis_info(rt: Services) -> dict[str, Any]:
    """Mode and availability probed now (a PING), never the connection error: it names hosts, ports
    and socket paths (the server log has it)."""
    info: dict[str, Any] = {"mode": rt.connector.mode, "available": rt.connector.available(max_age_s=0)}
    if rt.connector.embedded_dir is not None:
        info["dataDir"] = str(rt.connector.embedded_dir)
    if not info["available"]:
        info["error"] = REDIS_DOWN
    return info


def _maintenance_check(rt: Services) -> dict[str, Any]:
    """Unhealthy when no lint sweep ran in the last 48 h (counters live in Redis)."""
    if not rt.settings.maintenance.enabled:
        return {"healthy": True, "enabled": False, "reason": "maintenance disabled by configuration"}
    try:
        status = rt.maintenance.status()
    except StorageUnavailable:
        return {"healthy": False, "reason": REDIS_DOWN}
    last = status["lastMaintenanceAt"]
    healthy = last is not None and now_ms() - last <= MAINTENANCE_MAX_AGE_MS
    reason = None if healthy else ("no sweep yet" if last is None else "no sweep in the last 48 h")
    return {"healthy": healthy, **status, "reason": reason}


def _semantic_check(rt: Services, embedder_ok: bool) -> dict[str, Any]:
    """Probe the vector and keyword indexes loaded here (doc count, size) within 1 s."""
    if not embedder_ok:
        return {"healthy": False, "reason": "embedder unavailable"}

    def probe() -> dict[str, Any]:
        store = rt.semantic.store("episode")
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
    except StorageUnavailable:
        return {"healthy": False, "reason": REDIS_DOWN}
    except EmbeddingError:
        return {"healthy": False, "reason": EMBEDDER_DOWN}


def _guard_info(rt: Services) -> dict[str, Any]:
    """Informational: why background work would run or wait right now."""
    last_end = rt.activity.last_session_ended_at()
    return {
        "informational": True,
        "policy": rt.guard.config.policy.value,
        "activeSessions": rt.activity.active_session_count(),
        "secondsSinceLastSessionEnd": None if last_end is None else round(time.time() - last_end, 1),
    }


def ingest_queue_check(queue: IngestQueue, mode: str, worker_in_process: bool) -> dict[str, Any]:
    """The session-end queue: depth, oldest job, dead letters, live workers (unhealthy when jobs
    wait in queue mode and no worker is alive)."""
    try:
        stats = queue.stats()
    except StorageUnavailable:
        return {"healthy": False, "mode": mode, "reason": "Redis unavailable"}
    stuck = mode == "queue" and stats["depth"] > 0 and not stats["workersAlive"]
    reason = "jobs are waiting and no worker is alive (start `agtos worker`)" if stuck else None
    return {"healthy": not stuck, "mode": mode, "reason": reason, "workerInProcess": worker_in_process, **stats}
