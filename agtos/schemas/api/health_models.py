"""The ``/health`` response: tiers, checks, model backends."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agtos.schemas.api.response_base import ApiModel


class WorkingTierOut(ApiModel):
    available: bool
    sessions: int


class EpisodicTierOut(ApiModel):
    available: bool
    redis: dict[str, Any] = Field(description="connection mode, availability, last error")


class SemanticTierOut(ApiModel):
    available: bool
    search_mode: str
    embedder: str | None
    degraded_to: str | None = None
    error: str | None = None
    pending_vectors: int | None = Field(
        None, description="records stored for keyword search only while the embedder failed, waiting for vectors"
    )
    stale_vectors: str | None = Field(
        None,
        description="users whose vectors another embedder made (keyword search only for those records): "
        "run `agtos reindex`",
    )


class TiersOut(ApiModel):
    working: WorkingTierOut
    episodic: EpisodicTierOut
    semantic: SemanticTierOut


class MaintenanceCheckOut(ApiModel):
    healthy: bool
    enabled: bool | None = None
    last_maintenance_at: int | None = None
    total_sweeps: int | None = None
    reason: str | None = None


class KeywordIndexOut(ApiModel):
    backend: str
    docs: int
    memory_bytes: int


class SemanticCheckOut(ApiModel):
    healthy: bool
    reason: str | None = None
    backend: str | None = None
    docs: int | None = None
    memory_bytes: int | None = None
    keyword_index: KeywordIndexOut | None = None


class GuardCheckOut(ApiModel):
    informational: bool
    policy: str
    active_sessions: int
    seconds_since_last_session_end: float | None


class IngestQueueCheckOut(ApiModel):
    """The session-end ingestion queue (Redis stream): unhealthy when jobs wait and no worker is alive."""

    healthy: bool
    mode: str = Field(description="inline (on the request) or queue (a worker ingests)")
    reason: str | None = None
    depth: int | None = Field(None, description="jobs queued or in progress")
    oldest_age_s: float | None = Field(None, description="age of the oldest job; null when empty")
    dead_letters: int | None = Field(None, description="jobs given up after their attempts")
    workers_alive: int | None = Field(None, description="workers with a heartbeat in the last 15 s")
    worker_in_process: bool | None = Field(None, description="this API process runs a worker thread")
    done: int | None = None
    retries: int | None = None
    mean_job_s: float | None = None
    caught_up: int | None = Field(None, description="of done: stored by a quiet user's read (read catch-up)")


class ChecksOut(ApiModel):
    memory_maintenance: MaintenanceCheckOut = Field(alias="memory-maintenance")
    memory_semantic: SemanticCheckOut = Field(alias="memory-semantic")
    resource_guard: GuardCheckOut = Field(alias="resource-guard")
    ingest_queue: IngestQueueCheckOut | None = Field(None, alias="ingest-queue")


class LlmOut(ApiModel):
    provider: str
    summariser: str


class LlmSlotOut(ApiModel):
    provider: str = Field(description="builtin (the deterministic fallback), ollama, openai..., transformers")
    model: str | None = None
    loaded: bool | None = Field(None, description="in-process models: loaded in this process yet")
    error: str | None = Field(None, description="why the slot's model is unusable (the built-in fallback answers)")


class ModelBackendOut(ApiModel):
    backend: str | None = Field(description="the active model or fallback; null until first loaded")
    model_dir: str | None = Field(None, description="the configured model directory, if any")
    error: str | None = Field(None, description="why the configured model is not used")


class NliBackendOut(ModelBackendOut):
    runtime: Literal["onnxruntime", "torch"] | None = Field(
        None, description="a transformers model directory: what runs it, once loaded"
    )
    onnx_export: str | None = Field(None, description="the directory of its one-time ONNX export")
    onnx_error: str | None = Field(None, description="why it runs through torch: no ONNX export could be made")


class ProvidersOut(ApiModel):
    """Which providers are active: the LLM slots, NER and NLI (never loads a model to tell)."""

    llm: dict[str, LlmSlotOut]
    ner: ModelBackendOut
    nli: NliBackendOut


class HealthOut(ApiModel):
    status: Literal["ok", "degraded"]
    degraded: list[str] = Field(description="the tiers that are down")
    tiers: TiersOut
    checks: ChecksOut
    llm: LlmOut
    providers: ProvidersOut = Field(description="which model serves each LLM slot, NER and NLI, and why not")
