"""Runtime settings, read once from environment variables (all documented in README).

Every variable is prefixed ``AGTOS_`` except ``REDIS_URL``, which follows the
common convention. ``Settings.from_env()`` is the only place the environment is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs

from agtos.providers.onnx_quantize import check_quantize

APP_NAME = "agtos"
DEFAULT_PORT = 4102
DAY_SECONDS = 86_400


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _env_bool(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw not in _TRUE | _FALSE:
        raise ValueError(f"{name}={raw!r} is not a boolean (true/false, 1/0, yes/no, on/off)")
    return raw in _TRUE


def _env_number(name: str, default: float, kind: type) -> Any:
    raw = (os.environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None


def _env_int(name: str, default: int) -> int:
    return int(_env_number(name, default, int))


def _env_float(name: str, default: float) -> float:
    return float(_env_number(name, default, float))


def _env_hosts(name: str) -> frozenset[str]:
    """A comma-separated host list, lower-cased."""
    return frozenset(h.strip().lower() for h in os.environ.get(name, "").split(",") if h.strip())


@dataclass(frozen=True)
class WorkingMemoryConfig:
    """Limits of the in-process conversation buffer."""

    maxHistoryTokens: int = 4000  # noqa: N815 - names mirror the public config contract
    maxMessages: int = 30  # noqa: N815
    preserveRecentCount: int = 6  # noqa: N815

    def __post_init__(self) -> None:
        if self.maxMessages < 1 or self.maxHistoryTokens < 1:
            raise ValueError("AGTOS_WM_MAX_MESSAGES and AGTOS_WM_MAX_HISTORY_TOKENS must be >= 1")
        if not 0 <= self.preserveRecentCount < self.maxMessages:
            raise ValueError("AGTOS_WM_PRESERVE_RECENT must be >= 0 and below AGTOS_WM_MAX_MESSAGES")


@dataclass(frozen=True)
class LLMSlot:
    """Which LLM serves one task slot (``summarize``, ``consolidation``, ``maintenance``...)."""

    provider: str = "none"  # none | ollama | openai
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    timeout_s: float = 60.0


SEARCH_MODES = ("hybrid", "vector", "bm25")


@dataclass(frozen=True)
class EmbeddingConfig:
    """Which embedder serves semantic memory (default: the bundled ONNX MiniLM)."""

    provider: str = "onnx"  # onnx | ollama | openai | openrouter | openai-compatible
    model: str | None = None
    base_url: str | None = None
    api_key: str = ""
    quantize: str | None = None  # "int8": the bundled model's dynamic-int8 variant (about 2× faster)


@dataclass(frozen=True)
class MaintenanceConfig:
    """The six-step lint: thresholds, kill switch, schedule and guard waiting."""

    enabled: bool = True
    staleThresholdDays: float = 30.0  # noqa: N815 - names mirror the public config contract
    decayFactor: float = 0.9  # noqa: N815
    jaccardThreshold: float = 0.85  # noqa: N815
    orphanImportanceThreshold: float = 3.0  # noqa: N815 - on a 0-10 scale; episodes store 0-1
    pruneConfidenceThreshold: float = 0.3  # noqa: N815
    nli_enabled: bool = True
    nli_model_dir: str | None = None
    timezone: str = "UTC"
    guard_retries: int = 3
    guard_delay_s: float = 60.0
    candidate_top_k: int = 5
    candidate_cap: int = 500
    candidate_query_limit: int = 2_000  # most recently updated conclusions that look for neighbours
    judge_batch_size: int = 10


@dataclass(frozen=True)
class Settings:
    """All tunables of one running memory service."""

    redis_url: str | None = None
    data_dir: Path = field(default_factory=lambda: Path(platformdirs.user_data_dir(APP_NAME)))
    config_dir: Path = field(default_factory=lambda: Path.home() / f".{APP_NAME}")
    key_prefix: str = APP_NAME
    default_user: str = "default"
    episode_ttl_days: float = 30.0
    session_journal_ttl_hours: float = 48.0
    working: WorkingMemoryConfig = field(default_factory=WorkingMemoryConfig)
    llm_slots: dict[str, LLMSlot] = field(default_factory=dict)
    redis_timeout_s: float = 1.0
    port: int = DEFAULT_PORT
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    search_mode: str = "hybrid"
    similarity_threshold: float = 0.15
    hnsw_build_threads: int = 1  # threads of a background HNSW (re)build; 0: all cores
    hnsw_ef_search: int = 256  # HNSW expansion_search: higher = better recall, slower search
    query_expansion: bool = False
    background_work_policy: str = "auto"
    background_local_hosts: frozenset[str] = frozenset()  # hosts counted as this machine, besides localhost
    background_recent_session_s: float = 30.0  # background LLM work waits this long after a session ends
    query_ingest_threshold: int = 6
    query_ingest_max_per_session: int = 5
    session_idle_minutes: float = 30.0  # sessions silent this long are ended for the agent (0: never)
    dreamer_retries: int = 5
    dreamer_retry_delay_s: float = 60.0
    maintenance: MaintenanceConfig = field(default_factory=lambda: MaintenanceConfig())
    max_body_bytes: int = 1_048_576

    def __post_init__(self) -> None:
        if self.search_mode not in SEARCH_MODES:
            raise ValueError(f"AGTOS_MEMORY_SEARCH_MODE must be one of {SEARCH_MODES}, not {self.search_mode!r}")
        check_quantize(self.embedding.quantize)
        if self.hnsw_build_threads < 0:
            raise ValueError("AGTOS_HNSW_BUILD_THREADS must be >= 0 (0: all cores)")
        if not 10 <= self.hnsw_ef_search <= 4096:
            raise ValueError("AGTOS_HNSW_EF_SEARCH must be between 10 and 4096")
        if not 0.0 <= self.similarity_threshold <= 1.0:
            raise ValueError("AGTOS_MEMORY_SIMILARITY_THRESHOLD must be between 0 and 1")
        from agtos.tasks.resource_guard import parse_policy  # (that module imports this one)

        parse_policy(self.background_work_policy)
        self._check_limits()

    def _check_limits(self) -> None:
        """Counts, durations and thresholds in range (ValueError naming the variable otherwise)."""
        m = self.maintenance
        low_bound: dict[str, tuple[float, float]] = {  # name: (value, minimum); 0.0 minimum inclusive
            "AGTOS_EPISODE_TTL_DAYS": (self.episode_ttl_days, 1e-9),
            "AGTOS_SESSION_JOURNAL_TTL_HOURS": (self.session_journal_ttl_hours, 1e-9),
            "AGTOS_MAX_BODY_BYTES": (self.max_body_bytes, 1),
            "AGTOS_SESSION_IDLE_MINUTES": (self.session_idle_minutes, 0.0),
            "AGTOS_BACKGROUND_RECENT_SESSION_S": (self.background_recent_session_s, 0.0),
            "AGTOS_DREAMER_RETRIES": (self.dreamer_retries, 0.0),
            "AGTOS_DREAMER_RETRY_DELAY_S": (self.dreamer_retry_delay_s, 0.0),
            "AGTOS_QUERY_INGEST_THRESHOLD": (self.query_ingest_threshold, 0.0),
            "AGTOS_QUERY_INGEST_MAX_PER_SESSION": (self.query_ingest_max_per_session, 0.0),
            "AGTOS_MAINTENANCE_STALE_DAYS": (m.staleThresholdDays, 0.0),
            "AGTOS_MAINTENANCE_ORPHAN_IMPORTANCE": (m.orphanImportanceThreshold, 0.0),
            "AGTOS_MAINTENANCE_GUARD_RETRIES": (m.guard_retries, 0.0),
            "AGTOS_MAINTENANCE_GUARD_DELAY_S": (m.guard_delay_s, 0.0),
        }
        for name, (value, minimum) in low_bound.items():
            if not value >= minimum:
                raise ValueError(f"{name} must be {'>= 0' if minimum == 0 else '> 0'}, not {value!r}")
        for name, value in (
            ("AGTOS_MAINTENANCE_JACCARD", m.jaccardThreshold),
            ("AGTOS_MAINTENANCE_PRUNE_CONFIDENCE", m.pruneConfidenceThreshold),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, not {value!r}")
        try:
            ZoneInfo(m.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"AGTOS_MAINTENANCE_TIMEZONE={m.timezone!r} is not a known timezone") from None

    @property
    def episode_ttl_seconds(self) -> int:
        return max(1, int(self.episode_ttl_days * DAY_SECONDS))

    @property
    def session_journal_ttl_seconds(self) -> int:
        return max(60, int(self.session_journal_ttl_hours * 3600))

    def llm_slot(self, name: str) -> LLMSlot:
        """The slot's own provider, else the ``default`` slot, else no LLM."""
        return self.llm_slots.get(name) or self.llm_slots.get("default") or LLMSlot()

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def from_env(cls) -> Settings:
        data_dir = Path(os.environ.get("AGTOS_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))
        config_dir = Path(os.environ.get("AGTOS_CONFIG_DIR") or Path.home() / f".{APP_NAME}")
        return cls(
            redis_url=os.environ.get("REDIS_URL") or None,
            data_dir=data_dir,
            config_dir=config_dir,
            key_prefix=os.environ.get("AGTOS_KEY_PREFIX", APP_NAME),
            default_user=os.environ.get("AGTOS_DEFAULT_USER", "default"),
            episode_ttl_days=_env_float("AGTOS_EPISODE_TTL_DAYS", 30.0),
            session_journal_ttl_hours=_env_float("AGTOS_SESSION_JOURNAL_TTL_HOURS", 48.0),
            working=WorkingMemoryConfig(
                maxHistoryTokens=_env_int("AGTOS_WM_MAX_HISTORY_TOKENS", 4000),
                maxMessages=_env_int("AGTOS_WM_MAX_MESSAGES", 30),
                preserveRecentCount=_env_int("AGTOS_WM_PRESERVE_RECENT", 6),
            ),
            llm_slots=load_llm_slots(config_dir / "config.json"),
            redis_timeout_s=_env_float("AGTOS_REDIS_TIMEOUT_S", 1.0),
            port=_env_int("AGTOS_PORT", DEFAULT_PORT),
            embedding=EmbeddingConfig(
                provider=(os.environ.get("AGTOS_EMBEDDING_PROVIDER") or "onnx").strip().lower(),
                model=os.environ.get("AGTOS_EMBEDDING_MODEL") or None,
                base_url=os.environ.get("AGTOS_EMBEDDING_BASE_URL") or None,
                api_key=os.environ.get("AGTOS_EMBEDDING_API_KEY", ""),
                quantize=os.environ.get("AGTOS_EMBEDDING_QUANTIZE") or None,
            ),
            search_mode=(os.environ.get("AGTOS_MEMORY_SEARCH_MODE") or "hybrid").strip().lower(),
            similarity_threshold=_env_float("AGTOS_MEMORY_SIMILARITY_THRESHOLD", 0.15),
            hnsw_build_threads=_env_int("AGTOS_HNSW_BUILD_THREADS", 1),
            hnsw_ef_search=_env_int("AGTOS_HNSW_EF_SEARCH", 256),
            query_expansion=_env_bool("AGTOS_MEMORY_QUERY_EXPANSION", False),
            background_work_policy=os.environ.get("AGTOS_BACKGROUND_WORK_POLICY", "auto"),
            background_local_hosts=_env_hosts("AGTOS_BACKGROUND_LOCAL_HOSTS"),
            background_recent_session_s=_env_float("AGTOS_BACKGROUND_RECENT_SESSION_S", 30.0),
            query_ingest_threshold=_env_int("AGTOS_QUERY_INGEST_THRESHOLD", 6),
            query_ingest_max_per_session=_env_int("AGTOS_QUERY_INGEST_MAX_PER_SESSION", 5),
            session_idle_minutes=_env_float("AGTOS_SESSION_IDLE_MINUTES", 30.0),
            dreamer_retries=_env_int("AGTOS_DREAMER_RETRIES", 5),
            dreamer_retry_delay_s=_env_float("AGTOS_DREAMER_RETRY_DELAY_S", 60.0),
            maintenance=MaintenanceConfig(
                enabled=_env_bool("AGTOS_MAINTENANCE_ENABLED", True),
                staleThresholdDays=_env_float("AGTOS_MAINTENANCE_STALE_DAYS", 30.0),
                jaccardThreshold=_env_float("AGTOS_MAINTENANCE_JACCARD", 0.85),
                orphanImportanceThreshold=_env_float("AGTOS_MAINTENANCE_ORPHAN_IMPORTANCE", 3.0),
                pruneConfidenceThreshold=_env_float("AGTOS_MAINTENANCE_PRUNE_CONFIDENCE", 0.3),
                nli_enabled=_env_bool("AGTOS_NLI_ENABLED", True),
                nli_model_dir=os.environ.get("AGTOS_NLI_MODEL_DIR") or None,
                timezone=os.environ.get("AGTOS_MAINTENANCE_TIMEZONE", "UTC"),
                guard_retries=_env_int("AGTOS_MAINTENANCE_GUARD_RETRIES", 3),
                guard_delay_s=_env_float("AGTOS_MAINTENANCE_GUARD_DELAY_S", 60.0),
            ),
            max_body_bytes=_env_int("AGTOS_MAX_BODY_BYTES", 1_048_576),
        )


def _slot_from_env(prefix: str) -> LLMSlot | None:
    provider = os.environ.get(f"{prefix}_PROVIDER")
    if not provider:
        return None
    return LLMSlot(
        provider=provider.strip().lower(),
        model=os.environ.get(f"{prefix}_MODEL", ""),
        base_url=os.environ.get(f"{prefix}_BASE_URL", ""),
        api_key=os.environ.get(f"{prefix}_API_KEY", ""),
        timeout_s=_env_float(f"{prefix}_TIMEOUT_S", 60.0),
    )


def load_llm_slots(config_file: Path) -> dict[str, LLMSlot]:
    """Slots from ``~/.agtos/config.json`` (``{"slots": {name: {...}}}``), then env fallbacks.

    ``AGTOS_LLM_*`` sets the ``default`` slot; ``AGTOS_<SLOT>_*`` (e.g.
    ``AGTOS_CONSOLIDATION_PROVIDER``) fills a slot the file does not name.
    """
    slots: dict[str, LLMSlot] = {}
    if config_file.is_file():
        try:
            raw = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"config file {config_file} is not valid JSON: {exc}") from exc
        for name, spec in (raw.get("slots") or {}).items():
            allowed = {k: v for k, v in spec.items() if k in LLMSlot.__dataclass_fields__}
            slots[name] = LLMSlot(**allowed)
    default = _slot_from_env("AGTOS_LLM")
    if default and "default" not in slots:
        slots["default"] = default
    for name in ("summarize", "consolidation", "maintenance", "dialectic", "expansion"):
        env_slot = _slot_from_env(f"AGTOS_{name.upper()}")
        if env_slot and name not in slots:
            slots[name] = env_slot
    return slots
