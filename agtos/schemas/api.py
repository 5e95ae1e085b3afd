"""HTTP response models: the typed contract of every route, documented in ``/openapi.json``.

API models write camelCase keys (``alias_generator=to_camel``) and accept either spelling.
Stored records embedded in a response (a profile, conclusions, turns, lint reports) keep
the snake_case shape of :mod:`agtos.schemas.records`, as they always had. Fields with a
default are optional keys: routes that omit keys (health) serialise with ``exclude_unset``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field
from pydantic.alias_generators import to_camel

from agtos.schemas.records import (
    Conclusion,
    EntityType,
    EpisodeType,
    MaintenanceReport,
    Turn,
    UserProfile,
    now_ms,
)


class ApiModel(BaseModel):
    """Base of the response models: camelCase on the wire, built from domain objects' attributes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


# -- errors ----------------------------------------------------------------------------
class ErrorOut(ApiModel):
    """Every 4xx/5xx: a human-readable ``message`` (503 adds the storage error as ``detail``)."""

    message: str
    detail: str | None = None


class FieldErrorOut(ApiModel):
    field: str = Field(description="dotted location of the bad input ('' for the whole body)")
    message: str


class ValidationErrorOut(ApiModel):
    """422: the request did not match the schema (``errors`` per field) or an edit is impossible."""

    message: str
    errors: list[FieldErrorOut] = Field(default_factory=list)


# -- episodes, search, context, profile -------------------------------------------------
class EpisodeOut(ApiModel):
    """An episode as listed (facts and entities stay internal)."""

    id: str
    summary: str
    keywords: list[str]
    topic: str
    timestamp: int
    importance: float
    type: EpisodeType


class EpisodesOut(ApiModel):
    episodes: list[EpisodeOut]
    count: int
    available: bool = Field(description="false when Redis is down (the list is then empty)")


class HighlightOut(ApiModel):
    """A turn of the hit's session that matched the query."""

    speaker: str = Field(description="the speaker's name, else the role")
    role: str
    timestamp: int = Field(description="when it was said (ms)")
    position: int = Field(description="0-based place of the turn in its session")
    text: str = Field(description="the turn as said, relative dates resolved: 'yesterday [= 7 May 2023]'")
    score: float = Field(description="0-1")


class SearchHitOut(EpisodeOut):
    session_id: str = Field(description="the session the episode was made of ('' for imported episodes)")
    score: float = Field(description="0-1 for every mode: the episode's best evidence (turns, summary, memories)")
    match_type: str
    highlights: list[HighlightOut] = Field(description="the session's turns that matched, best first")


class SearchOut(ApiModel):
    query: str
    results: list[SearchHitOut]
    count: int
    available: bool


class ProfileOut(ApiModel):
    profile: UserProfile
    available: bool


class ContextItemOut(ApiModel):
    tier: Literal["working", "profile", "semantic", "conclusion", "turn", "episodic"]
    id: str
    text: str = Field(description="as written in the context (a turn: its dated speaker line)")
    relevance: float = Field(description="0-1, comparable within a tier")
    timestamp: int | None = Field(default=None, description="when it was said or learned (ms)")
    episode_id: str | None = Field(default=None, description="the source episode (a memory's or conclusion's first)")
    session_id: str | None = Field(default=None, description="the source episode's session")


class ContextOut(ApiModel):
    context: str = Field(description="the memory section for the system prompt ('' when nothing fits)")
    tokens: int
    items: list[ContextItemOut]
    available: bool


# -- sessions --------------------------------------------------------------------------
class SessionOut(ApiModel):
    """A live session's working memory."""

    session_id: str
    messages: list[Turn]
    message_count: int
    token_count: int
    compactions: int
    task_state: dict[str, Any]


class SessionEndOut(ApiModel):
    session_id: str
    saved: bool
    reason: str
    episode: EpisodeOut | None


# -- insight ---------------------------------------------------------------------------
class ConclusionsOut(ApiModel):
    conclusions: list[Conclusion]
    count: int


class ConclusionDeletedOut(ApiModel):
    deleted: str = Field(description="the id of the deleted conclusion")


class DreamOut(ApiModel):
    user_id: str
    episodes: int = Field(description="episodes consolidated")
    conclusions: list[Conclusion]
    source: str
    note: str | None


class EvidenceOut(ApiModel):
    id: str
    kind: Literal["profile", "conclusion", "memory", "turn", "episode"]
    text: str
    score: Annotated[float, AfterValidator(lambda score: round(score, 4))]


class AskOut(ApiModel):
    question: str
    answer: str
    source: str = Field(description="'extractive' or 'llm:<provider>'")
    evidence: list[EvidenceOut]
    evidence_ids: list[str]


class ScoreFactorOut(ApiModel):
    name: str
    points: int


class ResponseIngestOut(ApiModel):
    ingest: bool
    reason: Literal["ingest", "below-threshold", "session-cap", "dedup-window"]
    session_ingests: int | None
    score: int
    factors: list[ScoreFactorOut]
    reasoning_steps: int
    episode: EpisodeOut | None


# -- maintenance -----------------------------------------------------------------------
RunStatus = Literal["queued", "running", "completed", "deferred", "failed"]


class MaintenanceRun(ApiModel):
    """One requested lint sweep: queued, running, then its report (completed or deferred) or error.

    Stored as is (storage/maintenance_store.py); a completed run's report is also in the history,
    with ``summary.runId`` naming this run.
    """

    run_id: str
    user_id: str
    status: RunStatus = "queued"
    created_at: int = Field(default_factory=now_ms)
    started_at: int | None = None
    finished_at: int | None = None
    report: MaintenanceReport | None = None
    error: str | None = None
    flow_run_id: str | None = Field(default=None, description="the Prefect flow run, when a deployment ran it")


class MaintenanceHistoryOut(ApiModel):
    reports: list[MaintenanceReport]
    count: int


# -- privacy ---------------------------------------------------------------------------
class ForgottenItemOut(ApiModel):
    kind: Literal["episode", "memory", "conclusion", "entity"]
    id: str


class ForgetItemOut(ApiModel):
    forgotten: ForgottenItemOut


class ForgetAllOut(ApiModel):
    forgotten: Literal["all"]
    user_id: str
    keys_deleted: int


class PrivacyOut(ApiModel):
    user_id: str
    opt_out: bool


class PrivacyUpdateOut(PrivacyOut):
    keys_deleted: int = Field(description="keys removed by forget_existing (0 otherwise)")


# -- import ----------------------------------------------------------------------------
class SourceOut(ApiModel):
    """One discovered file (the importer's snake_case summary)."""

    model_config = ConfigDict(alias_generator=None)
    source: str
    path: str
    item_count: int
    warnings: list[str]


class SourcesOut(ApiModel):
    sources: list[SourceOut]
    count: int


class ImportOut(ApiModel):
    sessions: int
    episodes_added: int
    episodes_updated: int
    skipped: list[dict[str, str]]
    memories_added: int
    warnings: list[str]


# -- entities --------------------------------------------------------------------------
class EntityOut(ApiModel):
    id: str
    name: str
    type: EntityType
    aliases: list[str]
    confidence: float
    first_seen: int
    last_seen: int
    episode_ids: list[str]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def episode_count(self) -> int:
        return len(self.episode_ids)


class EntityPageOut(ApiModel):
    entities: list[EntityOut]
    count: int
    total: int
    offset: int
    next_offset: int | None = Field(description="offset of the next page; null on the last")
    available: bool


class EntityStatsOut(ApiModel):
    total: int
    by_type: dict[str, int]
    available: bool


class EntityEnvelope(ApiModel):
    entity: EntityOut


class EntityDeletedOut(ApiModel):
    id: str
    deleted: bool


class MergeCountsOut(ApiModel):
    moved: int
    merged: int
    dropped: int


class EntityMergeOut(ApiModel):
    entity: EntityOut
    merged: str = Field(description="the id of the entity folded in")
    relationships: MergeCountsOut


class EntityEpisodesOut(ApiModel):
    entity_id: str
    episodes: list[EpisodeOut]
    count: int


class EntityConclusionsOut(ApiModel):
    entity_id: str
    conclusions: list[Conclusion]
    count: int


class EntityRefOut(ApiModel):
    id: str
    name: str
    type: EntityType


class RelationshipOut(ApiModel):
    id: str
    type: str
    direction: Literal["out", "in"]
    confidence: float
    source_episode_ids: list[str]
    other: EntityRefOut


class EntityRelationshipsOut(ApiModel):
    entity_id: str
    relationships: list[RelationshipOut]
    count: int


# -- health ----------------------------------------------------------------------------
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


class ChecksOut(ApiModel):
    memory_maintenance: MaintenanceCheckOut = Field(alias="memory-maintenance")
    memory_semantic: SemanticCheckOut = Field(alias="memory-semantic")
    resource_guard: GuardCheckOut = Field(alias="resource-guard")


class LlmOut(ApiModel):
    provider: str
    summariser: str


class HealthOut(ApiModel):
    status: Literal["ok", "degraded"]
    degraded: list[str] = Field(description="the tiers that are down")
    tiers: TiersOut
    checks: ChecksOut
    llm: LlmOut
