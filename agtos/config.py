"""Runtime settings: one pydantic-settings object, the only reader of the environment.

Every documented variable (README, "Configuration") is a field whose ``validation_alias`` is the
variable's name; all are prefixed ``AGTOS_`` except ``REDIS_URL``. ``Settings()`` holds the
documented defaults and never looks at the environment; ``Settings.from_env()`` reads it through
pydantic-settings' ``EnvSettingsSource``. Invalid values raise :class:`SettingsError` (a
``ValueError``) naming the variable; blank variables count as unset.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from agtos.providers.onnx_quantize import check_quantize

APP_NAME = "agtos"
DEFAULT_PORT = 4102
DAY_SECONDS = 86_400

SearchMode = Literal["hybrid", "vector", "bm25"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
BackgroundPolicy = Literal["auto", "always", "idle-only"]
IngestMode = Literal["inline", "queue"]
AuthMode = Literal["auto", "required"]
EmbeddedRedisFsync = Literal["always", "everysec", "no"]  # the embedded Redis's appendfsync
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "testserver"})  # testserver: Starlette's TestClient
EmbeddingProvider = Literal["onnx", "local", "ollama", "openai", "openrouter", "openai-compatible"]
EMBEDDING_PROVIDERS: tuple[str, ...] = get_args(EmbeddingProvider)
LLM_SLOT_NAMES = ("summarize", "consolidation", "maintenance", "dialectic", "expansion")
LLM_PROVIDERS = ("none", "builtin", "ollama", "openai", "openrouter", "openai-compatible", "transformers")

_TYPE_ERRORS = {
    "int_parsing": "is not an integer",
    "int_from_float": "is not an integer",
    "int_type": "is not an integer",
    "float_parsing": "is not a number",
    "float_type": "is not a number",
    "bool_parsing": "is not a boolean (true/false, 1/0, yes/no, on/off)",
    "bool_type": "is not a boolean (true/false, 1/0, yes/no, on/off)",
    "finite_number": "is not a finite number",  # inf, nan, 1e999: int(inf) and Redis timeouts fail later
}
_BOUND_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


class SettingsError(ValueError):
    """An invalid setting; the message names its environment variable."""


def env(name: str, default: Any = None, **constraints: Any) -> Any:
    """A field read from the environment variable ``name`` (or set by its field name)."""
    if "default_factory" in constraints:
        return Field(validation_alias=name, **constraints)
    return Field(default, validation_alias=name, **constraints)


class _Section(BaseSettings):
    """Frozen settings whose fields are read from their variables only by ``from_env``."""

    model_config = SettingsConfigDict(
        frozen=True, validate_by_name=True, validate_by_alias=True, extra="forbid", allow_inf_nan=False
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(describe(type(self), exc)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the constructor's arguments only: from_env passes the environment in

    @classmethod
    def from_env(cls) -> Self:
        return cls(**read_env(cls))

    def with_overrides(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` (``model_copy(update=...)`` would skip validation)."""
        return type(self)(**(dict(self) | changes))


def read_env(section: type[_Section], prefix: str = "") -> dict[str, Any]:
    """The section's variables (``prefix`` + each field's alias) that are set and not blank, stripped."""
    source = EnvSettingsSource(section, case_sensitive=True, env_prefix=prefix, env_prefix_target="all")
    names = {f.validation_alias for f in section.model_fields.values() if isinstance(f.validation_alias, str)}
    return {k: v.strip() for k, v in source().items() if k in names and isinstance(v, str) and v.strip()}


def _field(section: type[_Section], loc: tuple[int | str, ...]) -> FieldInfo | None:
    """The field an error location points at, through nested sections (keys are names or aliases)."""
    info: FieldInfo | None = None
    model: Any = section
    for key in loc:
        if not (isinstance(model, type) and issubclass(model, _Section)):
            return None
        info = next((f for n, f in model.model_fields.items() if key in (n, f.validation_alias)), None)
        model = info.annotation if info else None
    return info


def _bound(info: FieldInfo | None) -> str:
    """``between 0 and 1``, ``>= 0`` or ``> 0``: the field's documented range."""
    limits = {k: getattr(m, k) for m in (info.metadata if info else []) for k in ("ge", "gt", "le") if hasattr(m, k)}
    low = f"{limits['ge']:g}" if "ge" in limits else None
    if "le" in limits and low is not None:
        return f"between {low} and {limits['le']:g}"
    if low is not None:
        return f">= {low}"
    return f"> {limits['gt']:g}" if "gt" in limits else f"<= {limits.get('le', '?')}"


def _message(section: type[_Section], error: ErrorDetails) -> str:
    info = _field(section, error["loc"])
    alias = info.validation_alias if info and isinstance(info.validation_alias, str) else None
    variable = alias or ".".join(map(str, error["loc"]))
    kind, value = error["type"], error.get("input")
    if kind in _TYPE_ERRORS:
        return f"{variable}={value!r} {_TYPE_ERRORS[kind]}"
    if kind in _BOUND_ERRORS:
        hint = f" ({info.description})" if info and info.description else ""
        return f"{variable} must be {_bound(info)}{hint}, not {value!r}"
    if kind == "literal_error":
        return f"{variable} must be one of {error.get('ctx', {}).get('expected')}, not {value!r}"
    if kind == "value_error":
        cause = error.get("ctx", {}).get("error", error["msg"])
        named = isinstance(cause, SettingsError) or not error["loc"] or str(cause).startswith(variable)
        return str(cause) if named else f"{variable}={value!r} {cause}"
    return f"{variable}={value!r}: {error['msg']}"


def describe(section: type[_Section], exc: ValidationError) -> str:
    """One line per invalid value, each naming its variable."""
    return "; ".join(_message(section, error) for error in exc.errors())


def _normal(value: Any) -> Any:
    """Enumerated values are matched without case or surrounding spaces."""
    return value.strip().lower() if isinstance(value, str) else value


def _off_or_seconds(value: Any) -> Any:
    """``off`` (any case) or a negative number: None (never); else the value, validated as seconds."""
    if isinstance(value, str) and value.strip().lower() == "off":
        return None
    try:
        negative = value is not None and float(value) < 0
    except (TypeError, ValueError):
        return value  # not a number: the float validation names the variable
    return None if negative else value


class WorkingMemoryConfig(_Section):
    """Limits of the in-process conversation buffer."""

    maxHistoryTokens: int = env("AGTOS_WM_MAX_HISTORY_TOKENS", 4000, ge=1)  # noqa: N815 - the public config names
    maxMessages: int = env("AGTOS_WM_MAX_MESSAGES", 30, ge=1)  # noqa: N815
    preserveRecentCount: int = env("AGTOS_WM_PRESERVE_RECENT", 6, ge=0)  # noqa: N815
    # live sessions held in this process; the least recently used go back to their Redis journal
    maxSessions: int = env("AGTOS_WM_MAX_SESSIONS", 1000, ge=1)  # noqa: N815

    @model_validator(mode="after")
    def _keeps_fewer_than_it_holds(self) -> Self:
        if self.preserveRecentCount >= self.maxMessages:
            raise ValueError("AGTOS_WM_PRESERVE_RECENT must be >= 0 and below AGTOS_WM_MAX_MESSAGES")
        return self


class LLMSlot(_Section):
    """Which LLM serves one task slot; from the environment, ``AGTOS_<SLOT>_PROVIDER`` and so on."""

    # none | ollama | openai | openrouter | openai-compatible | transformers (MODEL: a local model directory)
    provider: str = env("PROVIDER", "none")
    model: str = env("MODEL", "")
    base_url: str = env("BASE_URL", "")
    api_key: str = env("API_KEY", "")
    timeout_s: float = env("TIMEOUT_S", 60.0, gt=0)
    max_tokens: int = env("MAX_TOKENS", 512, ge=1)  # new tokens per reply of an in-process (transformers) model

    _lower = field_validator("provider", mode="before")(_normal)

    @classmethod
    def from_prefix(cls, prefix: str) -> LLMSlot | None:
        """The slot ``<prefix>PROVIDER`` names (e.g. ``AGTOS_LLM_``), None when it is unset."""
        values = read_env(cls, prefix)
        if "PROVIDER" not in values:
            return None
        try:
            slot = cls(**values)
            slot.check_usable()
        except SettingsError as exc:  # each problem starts with its alias (TIMEOUT_S): name the variable
            raise SettingsError("; ".join(prefix + problem for problem in str(exc).split("; "))) from None
        return slot

    def check_usable(self) -> None:
        """A provider ``build_llm`` knows, with the base URL it needs: else the service would fail at start."""
        if self.provider and self.provider not in LLM_PROVIDERS:
            raise SettingsError(f"PROVIDER must be one of {', '.join(map(repr, LLM_PROVIDERS))}, not {self.provider!r}")
        if self.provider == "openai-compatible" and not self.base_url:
            raise SettingsError("BASE_URL is needed with PROVIDER='openai-compatible'")


class EmbeddingConfig(_Section):
    """Which embedder serves semantic memory (default: the bundled ONNX MiniLM)."""

    provider: EmbeddingProvider = env("AGTOS_EMBEDDING_PROVIDER", "onnx")
    model: str | None = env("AGTOS_EMBEDDING_MODEL")
    base_url: str | None = env("AGTOS_EMBEDDING_BASE_URL")
    api_key: str = env("AGTOS_EMBEDDING_API_KEY", "")
    quantize: str | None = env("AGTOS_EMBEDDING_QUANTIZE")  # "int8": the bundled model's dynamic-int8 variant
    threads: int = env("AGTOS_EMBEDDING_THREADS", 2, ge=1)  # intra-op threads of the bundled model
    timeout_s: float = env("AGTOS_EMBEDDING_TIMEOUT_S", 30.0, gt=0)  # per call to a remote embedder
    # a remote embedder on the query path: a search's embedding (and the first dimension probe) waits at
    # most this long (capped by timeout_s), then the search answers from the keyword index
    query_timeout_s: float = env("AGTOS_EMBEDDING_QUERY_TIMEOUT_S", 2.0, gt=0)
    # a remote embedder's other calls while a request is served (/ask scoring its evidence sentences,
    # ~10-25 texts): the longest wait (capped by timeout_s) before the request goes on without vectors
    request_timeout_s: float = env("AGTOS_EMBEDDING_REQUEST_TIMEOUT_S", 5.0, gt=0)
    # this many failed or silent calls in a row make every call fail at once for the cool-down (0: never)
    breaker_failures: int = env("AGTOS_EMBEDDING_BREAKER_FAILURES", 2, ge=0, description="0: off")
    breaker_cooldown_s: float = env("AGTOS_EMBEDDING_BREAKER_COOLDOWN_S", 10.0, gt=0)

    _lower = field_validator("provider", mode="before")(_normal)

    @field_validator("quantize")
    @classmethod
    def _known_variant(cls, value: str | None) -> str | None:
        return check_quantize(value)


class MaintenanceConfig(_Section):
    """The six-step lint: thresholds, kill switch, schedule and guard waiting."""

    enabled: bool = env("AGTOS_MAINTENANCE_ENABLED", True)
    staleThresholdDays: float = env("AGTOS_MAINTENANCE_STALE_DAYS", 30.0, ge=0)  # noqa: N815 - the public config names
    decayFactor: float = 0.9  # noqa: N815
    jaccardThreshold: float = env("AGTOS_MAINTENANCE_JACCARD", 0.85, ge=0, le=1)  # noqa: N815
    orphanImportanceThreshold: float = env("AGTOS_MAINTENANCE_ORPHAN_IMPORTANCE", 3.0, ge=0)  # noqa: N815 - 0-10 scale
    pruneConfidenceThreshold: float = env("AGTOS_MAINTENANCE_PRUNE_CONFIDENCE", 0.3, ge=0, le=1)  # noqa: N815
    nli_enabled: bool = env("AGTOS_NLI_ENABLED", True)
    nli_model_dir: str | None = env("AGTOS_NLI_MODEL_DIR")  # ONNX + manifest, or a transformers classifier dir
    timezone: str = env("AGTOS_MAINTENANCE_TIMEZONE", "UTC")
    guard_retries: int = env("AGTOS_MAINTENANCE_GUARD_RETRIES", 3, ge=0)
    guard_delay_s: float = env("AGTOS_MAINTENANCE_GUARD_DELAY_S", 60.0, ge=0)
    candidate_top_k: int = 5
    candidate_cap: int = 500
    candidate_query_limit: int = 2_000  # most recently updated conclusions that look for neighbours
    judge_batch_size: int = 10

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("is not a known timezone") from None
        return value


REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")


def _redis_url(value: Any) -> Any:
    """``REDIS_URL`` names a scheme the connector serves; the URL itself is never echoed (it may hold a password)."""
    if isinstance(value, str) and value.strip():
        scheme, sep, _ = value.strip().partition("://")
        if not sep or scheme.lower() not in REDIS_SCHEMES:
            raise ValueError(
                "REDIS_URL must start with " + ", ".join(f"{s}://" for s in REDIS_SCHEMES) + " (the value is not shown)"
            )
    return value


def _hosts(value: Any) -> Any:
    """A comma-separated host list, lower-cased."""
    items = value.split(",") if isinstance(value, str) else value
    return frozenset(h.strip().lower() for h in items if h.strip())


def _origins(value: Any) -> Any:
    """A comma-separated list of browser origins (``https://app.example.com``), lower-cased; no ``*``."""
    origins = frozenset(o.rstrip("/") for o in _hosts(value))
    for origin in origins:
        if not re.fullmatch(r"https?://[^/*\s]+", origin):
            raise ValueError(f"{origin!r} is not an origin such as https://app.example.com (no '*', no path)")
    return origins


class Settings(_Section):
    """All tunables of one running memory service."""

    redis_url: str | None = env("REDIS_URL")
    data_dir: Path = env("AGTOS_DATA_DIR", default_factory=lambda: Path(platformdirs.user_data_dir(APP_NAME)))
    config_dir: Path = env("AGTOS_CONFIG_DIR", default_factory=lambda: Path.home() / f".{APP_NAME}")
    key_prefix: str = env("AGTOS_KEY_PREFIX", APP_NAME)
    default_user: str = env("AGTOS_DEFAULT_USER", "default")
    episode_ttl_days: float = env("AGTOS_EPISODE_TTL_DAYS", 30.0, gt=0)
    session_journal_ttl_hours: float = env("AGTOS_SESSION_JOURNAL_TTL_HOURS", 48.0, gt=0)
    # journal caps: an append past one is refused with 413 (never trimmed)
    session_max_turns: int = env("AGTOS_SESSION_MAX_TURNS", 5_000, ge=1)
    # 1 MiB: an end costs about its text's embedding (0.17-0.55 s per KB on 2 cores, benchmarks/session_end_cost.py)
    session_max_bytes: int = env("AGTOS_SESSION_MAX_BYTES", 1024 * 1024, ge=1)
    user_max_sessions: int = env("AGTOS_USER_MAX_SESSIONS", 100, ge=1)
    user_max_turns: int = env("AGTOS_USER_MAX_TURNS", 20_000, ge=1)
    working: WorkingMemoryConfig = Field(default_factory=WorkingMemoryConfig)
    llm_slots: dict[str, LLMSlot] = Field(default_factory=dict)  # config.json, then AGTOS_LLM_* / AGTOS_<SLOT>_*
    redis_timeout_s: float = env("AGTOS_REDIS_TIMEOUT_S", 1.0, gt=0)
    # always: each write is fsynced to the embedded Redis's AOF before its reply (acknowledged means durable);
    # everysec: once a second, so a crash of that redis-server loses the last ~2 s of acknowledged writes
    embedded_redis_fsync: EmbeddedRedisFsync = env("AGTOS_EMBEDDED_REDIS_FSYNC", "always")
    port: int = env("AGTOS_PORT", DEFAULT_PORT, ge=1, le=65_535)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    search_mode: SearchMode = env("AGTOS_MEMORY_SEARCH_MODE", "hybrid")
    similarity_threshold: float = env("AGTOS_MEMORY_SIMILARITY_THRESHOLD", 0.15, ge=0, le=1)
    hnsw_build_threads: int = env("AGTOS_HNSW_BUILD_THREADS", 1, ge=0, description="0: all cores")
    hnsw_ef_search: int = env("AGTOS_HNSW_EF_SEARCH", 256, ge=10, le=4096)  # higher = better recall, slower
    query_expansion: bool = env("AGTOS_MEMORY_QUERY_EXPANSION", False)
    # a transformers token-classification directory (e.g. bert-base-NER) used instead of spaCy
    ner_model_dir: str | None = env("AGTOS_NER_MODEL_DIR")
    background_work_policy: BackgroundPolicy = env("AGTOS_BACKGROUND_WORK_POLICY", "auto")
    # hosts counted as this machine, besides localhost
    background_local_hosts: Annotated[frozenset[str], NoDecode] = env("AGTOS_BACKGROUND_LOCAL_HOSTS", frozenset())
    background_recent_session_s: float = env("AGTOS_BACKGROUND_RECENT_SESSION_S", 30.0, ge=0)
    query_ingest_threshold: int = env("AGTOS_QUERY_INGEST_THRESHOLD", 6, ge=0)
    query_ingest_max_per_session: int = env("AGTOS_QUERY_INGEST_MAX_PER_SESSION", 5, ge=0)
    session_idle_minutes: float = env("AGTOS_SESSION_IDLE_MINUTES", 30.0, ge=0, description="0: never")
    # session-end ingestion: inline on the request (Settings(), create_app(), tests) or through the
    # durable queue to a worker (`agtos serve` / `make run` default to queue); see README "Ingestion queue"
    ingest_mode: IngestMode = env("AGTOS_INGEST_MODE", "inline")
    ingest_worker: bool = env("AGTOS_INGEST_WORKER", True, description="queue mode: the API runs a worker thread")
    # the API's worker thread waits while requests are in flight, at most this long per batch
    worker_yield_max_s: float = env("AGTOS_WORKER_YIELD_MAX_S", 2.0, ge=0, description="0: never waits")
    # queue mode: an HTTP session end without ?wait, the only request in flight in its API process
    # with a worker alive, waits up to this long for its own episode (read-your-writes for a lone
    # client); 4 s: above a job's time, below the 5 s timeout of common HTTP clients (httpx)
    end_idle_wait_s: float = env("AGTOS_END_IDLE_WAIT_S", 4.0, ge=0, le=60, description="0: off")
    # queue mode: a read (search, context, ask) of a quiet user (no live session, newest queued end at
    # least this old) first stores that user's own queued ends itself, one run of them (README "A lone
    # client reads what it ended"); None ("off", or negative): never
    read_catchup_after_s: float | None = env(
        "AGTOS_READ_CATCHUP_AFTER_S", 2.0, allow_inf_nan=False, description="off: never"
    )
    ingest_max_attempts: int = env("AGTOS_INGEST_MAX_ATTEMPTS", 5, ge=1)
    ingest_retry_delay_s: float = env("AGTOS_INGEST_RETRY_DELAY_S", 5.0, ge=0)
    ingest_claim_idle_s: float = env("AGTOS_INGEST_CLAIM_IDLE_S", 120.0, gt=0)  # then a dead worker's job moves on
    # a writer waiting for a user's lock that live holders keep (each at most 60 s) gives up after this long
    # (a queued job is handed back and retried, not counted towards the dead letters)
    lock_wait_max_s: float = env("AGTOS_LOCK_WAIT_MAX_S", 600.0, ge=0, description="0: waits without end")
    dreamer_retries: int = env("AGTOS_DREAMER_RETRIES", 5, ge=0)
    dreamer_retry_delay_s: float = env("AGTOS_DREAMER_RETRY_DELAY_S", 60.0, ge=0)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    max_body_bytes: int = env("AGTOS_MAX_BODY_BYTES", 1_048_576, ge=1)
    import_home: Path | None = env("AGTOS_IMPORT_HOME")  # where imports look for other tools' files (None: ~)
    import_enabled: bool = env("AGTOS_IMPORT_ENABLED", False)  # GET /sources, POST /import (service keys only)
    auth: AuthMode = env("AGTOS_AUTH", "auto")  # auto: on once any API key exists; required: always on
    # Host header values served (no port); "*" allows any
    allowed_hosts: Annotated[frozenset[str], NoDecode] = env("AGTOS_ALLOWED_HOSTS", LOOPBACK_HOSTS)
    # browser origins allowed to call the API cross-origin (CORS); none by default: preflights get a 405
    cors_origins: Annotated[frozenset[str], NoDecode] = env("AGTOS_CORS_ORIGINS", frozenset())
    rate_limit_per_s: float = env("AGTOS_RATE_LIMIT_PER_S", 100.0, ge=0, description="0: no limit")  # per API key
    rate_limit_burst: int = env("AGTOS_RATE_LIMIT_BURST", 200, ge=1)
    # the cyclic garbage collector of an API process (agtos/serving/gc_tuning.py): freeze what is
    # alive after start-up (its full collections then skip it), and an opt-in recorder of its pauses
    gc_freeze: bool = env("AGTOS_GC_FREEZE", True)
    gc_stats_dir: Path | None = env("AGTOS_GC_STATS_DIR")  # each process writes gc-<pid>.json when it stops

    _lower = field_validator(
        "search_mode", "background_work_policy", "auth", "ingest_mode", "embedded_redis_fsync", mode="before"
    )(_normal)
    _catchup_off = field_validator("read_catchup_after_s", mode="before")(lambda v: _off_or_seconds(v))
    _redis_scheme = field_validator("redis_url", mode="before")(_redis_url)
    _host_list = field_validator("background_local_hosts", "allowed_hosts", mode="before")(_hosts)
    _origin_list = field_validator("cors_origins", mode="before")(_origins)

    @property
    def episode_ttl_seconds(self) -> int:
        return max(1, int(self.episode_ttl_days * DAY_SECONDS))

    @property
    def session_journal_ttl_seconds(self) -> int:
        return max(60, int(self.session_journal_ttl_hours * 3600))

    def llm_slot(self, name: str) -> LLMSlot:
        """The slot's own provider, else the ``default`` slot, else no LLM."""
        return self.llm_slots.get(name) or self.llm_slots.get("default") or LLMSlot()

    @classmethod
    def from_env(cls) -> Self:
        """Every variable of the README, validated; the LLM slots from ``<config dir>/config.json``, then the env."""
        read = cls(
            **read_env(cls),
            working=WorkingMemoryConfig.from_env(),
            embedding=EmbeddingConfig.from_env(),
            maintenance=MaintenanceConfig.from_env(),
        )
        return read.with_overrides(llm_slots=load_llm_slots(read.config_dir / "config.json"))


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
            raise SettingsError(f"config file {config_file} is not valid JSON: {exc}") from exc
        entries = (raw.get("slots") or {}) if isinstance(raw, dict) else None
        if not isinstance(entries, dict) or not all(isinstance(spec, dict) for spec in entries.values()):
            raise SettingsError(f'config file {config_file} is not {{"slots": {{"<slot>": {{"provider": ...}}}}}}')
        for name, spec in entries.items():
            try:
                slots[name] = LLMSlot(**{k: v for k, v in spec.items() if k in LLMSlot.model_fields})
                slots[name].check_usable()
            except SettingsError as exc:
                raise SettingsError(f"config file {config_file}, slot {name!r}: {exc}") from None
    for name, prefix in (("default", "AGTOS_LLM_"), *((n, f"AGTOS_{n.upper()}_") for n in LLM_SLOT_NAMES)):
        if name not in slots and (slot := LLMSlot.from_prefix(prefix)) is not None:
            slots[name] = slot
    return slots
