"""HTTP response models: the typed contract of every route, documented in ``/openapi.json``.

API models write camelCase keys (``alias_generator=to_camel``) and accept either spelling.
Stored records embedded in a response (a profile, conclusions, turns, lint reports) keep
the snake_case shape of :mod:`agtos.schemas.records`, as they always had. Fields with a
default are optional keys: routes that omit keys (health) serialise with ``exclude_unset``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from agtos.schemas.records import (
    MAX_TIMESTAMP_MS,
    Conclusion,
    EntityType,
    EpisodeType,
    MaintenanceReport,
    Role,
    Turn,
    UserProfile,
    now_ms,
)


class ApiModel(BaseModel):
    """Base of the response models: camelCase on the wire, built from domain objects' attributes."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, from_attributes=True)


# -- errors ----------------------------------------------------------------------------
class ErrorOut(ApiModel):
    """Every 4xx/5xx: a human-readable ``message`` (never a connection string or a traceback)."""

    message: str
    detail: str | None = None


class FieldErrorOut(ApiModel):
    field: str = Field(description="dotted location of the bad input ('' for the whole body)")
    message: str


class ValidationErrorOut(ApiModel):
    """422: the request did not match the schema (``errors`` per field) or an edit is impossible."""

    message: str
    errors: list[FieldErrorOut] = Field(default_factory=list)


# -- requests --------------------------------------------------------------------------
# Request bodies: snake_case keys, unknown keys refused; each carries an example for /openapi.json.
# They live here (not in the routers) so the Python client and the MCP tools build the same bodies.
RECORD_ID = r"^[A-Za-z0-9_.-]{1,128}$"
MAX_QUERY_CHARS = 1_000
SpeakerName = Annotated[str, Field(min_length=1, max_length=128)]


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    """A request model's config: unknown keys refused, ``examples`` shown in the OpenAPI schema."""
    return ConfigDict(extra="forbid", json_schema_extra={"examples": list(examples)})


class TurnIn(BaseModel):
    """One turn as a client sends it: no ``tool`` role and no ``is_summary`` (working memory's
    own summaries are the only summary turns)."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1, max_length=100_000)
    timestamp: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS, description="ms; default: now")
    name: str | None = Field(default=None, max_length=128, description="the speaker's name")

    def to_turn(self, name: str | None = None) -> Turn:
        """The stored turn, named ``name`` when given."""
        return Turn.model_validate({**self.model_dump(exclude_none=True), **({"name": name} if name else {})})


class TurnsIn(BaseModel):
    model_config = _examples(
        {
            "turns": [
                {"role": "user", "content": "What is the weather forecast for San Francisco?"},
                {"role": "assistant", "content": "Sunny, 19 degrees."},
                {"role": "user", "content": "I prefer metric units."},
            ],
            "speakers": {"user": "Alice"},
        }
    )
    turns: list[TurnIn] = Field(min_length=1, max_length=200)
    speakers: dict[Role, SpeakerName] = Field(
        default_factory=dict, description="speaker names by role, given to the turns that carry no name"
    )

    def named_turns(self) -> list[Turn]:
        """The turns, each named by its own ``name`` or else by ``speakers``."""
        return [
            t.to_turn() if t.name or t.role not in self.speakers else t.to_turn(self.speakers[Role(t.role)])
            for t in self.turns
        ]


class ContextRequest(BaseModel):
    model_config = _examples({"query": "what units should I answer in?", "token_budget": 600})
    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S", description="what the agent is about to answer"
    )
    session_id: str | None = Field(default=None, pattern=RECORD_ID, description="the live session to include")
    token_budget: int = Field(default=800, ge=50, le=8_000, description="tokens the memory section may take")
    limit: int = Field(default=10, ge=1, le=50, description="items per tier")


class AskRequest(BaseModel):
    model_config = _examples({"question": "Which units does the user like?"})
    question: str = Field(min_length=1, max_length=2_000, pattern=r"\S", description="a question about the user")
    limit: int = Field(default=5, ge=1, le=20, description="evidence items to draw on")


class ResponseIn(BaseModel):
    model_config = _examples(
        {
            "session_id": "s1",
            "query": "Compare the two flights",
            "response": "Flight A is cheaper but has a layover; therefore flight B is the better choice.",
            "tool_calls": 2,
        }
    )
    session_id: str = Field(pattern=RECORD_ID)
    response: str = Field(min_length=1, max_length=100_000, pattern=r"\S")
    query: str | None = Field(default=None, max_length=10_000)
    tool_calls: int = Field(default=0, ge=0, le=1_000)
    reasoning_steps: int | None = Field(default=None, ge=0, le=1_000)


ForgetKind = Literal["episode", "memory", "conclusion", "entity"]


class ForgetRequest(BaseModel):
    model_config = _examples({"kind": "episode", "id": "ep-0123456789abcdef"}, {"kind": "all"})
    kind: ForgetKind | Literal["all"] = Field(description="the record's kind, or 'all' for everything of the user")
    id: str | None = Field(default=None, pattern=RECORD_ID, description="the record's id (none with 'all')")

    @model_validator(mode="after")
    def _id_matches_kind(self) -> ForgetRequest:
        if (self.kind == "all") != (self.id is None):
            raise ValueError("give an id for one record, and no id with kind 'all'")
        return self


class PrivacySettings(BaseModel):
    model_config = _examples({"opt_out": True, "forget_existing": False})
    opt_out: bool
    forget_existing: bool = False


SourceName = Literal["claude_code", "cursor", "windsurf", "aider", "copilot"]


class ImportRequest(BaseModel):
    model_config = _examples({"sources": ["claude_code", "cursor"]})
    sources: list[SourceName] | None = Field(default=None, max_length=5, description="all when absent")


class EntityUpdate(BaseModel):
    """Fields to change; at least one. A rename keeps the old name as an alias unless ``aliases`` is sent."""

    model_config = _examples({"name": "Acme Corporation", "aliases": ["Acme", "ACME Corp"]})
    name: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"\S")
    type: EntityType | None = None
    aliases: list[Annotated[str, Field(min_length=1, max_length=256, pattern=r"\S")]] | None = Field(
        default=None, max_length=200
    )
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _something(self) -> EntityUpdate:
        if not self.model_fields_set or all(getattr(self, f) is None for f in self.model_fields_set):
            raise ValueError("send at least one of name, type, aliases, confidence")
        return self


class MergeRequest(BaseModel):
    model_config = _examples({"duplicate_id": "ent-0123456789abcdef"})
    duplicate_id: str = Field(min_length=1, max_length=128, description="the entity folded into this one")

    @field_validator("duplicate_id")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


MAX_CONVERSATION_SESSIONS = 100
MAX_CONVERSATION_TURNS = 2_000


_SESSION_EXAMPLE: dict[str, Any] = {
    "id": "chat-2023-05-08",
    "started_at": 1683536400000,
    "speakers": {"user": "Jon", "assistant": "Gina"},
    "turns": [
        {"role": "user", "content": "I lost my job yesterday.", "timestamp": 1683536400000},
        {"role": "assistant", "content": "I'm sorry, Jon. What happened?", "timestamp": 1683536460000},
    ],
}


class ConversationSession(BaseModel):
    """One past session of a chat log: its turns in order, each with its time."""

    model_config = _examples(_SESSION_EXAMPLE)
    id: str = Field(pattern=RECORD_ID, description="the session's id: ingesting it again stores nothing new")
    started_at: int | None = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="ms; the time of turns sent without a timestamp"
    )
    speakers: dict[Role, SpeakerName] = Field(
        default_factory=dict, description="speaker names by role, given to the turns that carry no name"
    )
    turns: list[Turn] = Field(min_length=1, max_length=MAX_CONVERSATION_TURNS)

    def dated_turns(self) -> list[Turn]:
        """The turns named by ``speakers`` and, when sent without a time, dated ``started_at`` (+1 ms each)."""
        out = []
        for i, turn in enumerate(self.turns):
            update: dict[str, Any] = {}
            if not turn.name and turn.role in self.speakers:
                update["name"] = self.speakers[Role(turn.role)]
            if "timestamp" not in turn.model_fields_set and self.started_at is not None:
                update["timestamp"] = self.started_at + i
            out.append(turn.model_copy(update=update) if update else turn)
        return out


class ConversationsIn(BaseModel):
    model_config = _examples({"sessions": [_SESSION_EXAMPLE]})
    sessions: list[ConversationSession] = Field(min_length=1, max_length=MAX_CONVERSATION_SESSIONS)

    @model_validator(mode="after")
    def _unique_ids(self) -> ConversationsIn:
        ids = [s.id for s in self.sessions]
        if len(set(ids)) != len(ids):
            raise ValueError("session ids must be unique within a request")
        return self


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
class TurnsAppendedOut(ApiModel):
    """The acknowledgement of an append: the turns are journalled (durable) and in working memory."""

    session_id: str
    appended: int = Field(description="turns appended by this request")
    message_count: int = Field(description="messages in working memory now (a summary counts as one)")
    token_count: int
    compactions: int
    journal_length: int = Field(description="turns journalled for the live session (0 for an opted-out user)")


class SessionOut(ApiModel):
    """A live session's working memory."""

    session_id: str
    messages: list[Turn]
    message_count: int
    token_count: int
    compactions: int
    task_state: dict[str, Any]


class SessionEndOut(ApiModel):
    """What a session end accepted, and when its episode will be searchable."""

    session_id: str
    saved: bool
    reason: str
    episode: EpisodeOut | None = Field(description="the stored episode; null while queued or when not saved")
    episode_id: str | None = Field(None, description="the episode the session becomes (known before it is stored)")
    status: Literal["done", "queued", "skipped"] = Field(
        "done", description="done: stored and searchable; queued: held durably, a worker will store it; skipped"
    )
    turns_accepted: int = Field(0, description="the session's turns taken into the episode (or its queued job)")
    queue_position: int | None = Field(None, description="jobs in the ingestion queue up to this one")
    searchable_in_s: float | None = Field(
        None, description="estimated seconds until searchable (position x mean job time / live workers), or null"
    )


class ConversationResultOut(ApiModel):
    """What became of one session of a conversation ingest."""

    id: str = Field(description="the session's id as sent")
    status: Literal["stored", "unchanged", "skipped"] = Field(
        description="stored now; unchanged: stored before (nothing written); skipped: not worth an episode"
    )
    episode_id: str | None = Field(description="the session's episode (stored or unchanged)")
    turns: int = Field(description="turns received")
    reason: str | None = Field(default=None, description="why it was skipped")


class ConversationsOut(ApiModel):
    sessions: list[ConversationResultOut]
    stored: int
    unchanged: int
    skipped: int
    memories: int = Field(description="semantic memories written for the stored sessions")
    degraded: str | None = Field(default=None, description="set when the batch was stored for keyword search only")


# -- insight ---------------------------------------------------------------------------
class ConclusionsOut(ApiModel):
    conclusions: list[Conclusion]
    count: int
    available: bool = Field(default=True, description="false when Redis is down (the list is then empty)")


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
    answer: str = Field(description='one or two sentences from the best evidence, or "I don\'t know: …"')
    answered: bool = Field(default=True, description="false when nothing stored is relevant enough (abstention)")
    relevance: float = Field(default=0.0, description="0-1: how well the best evidence sentence matches the question")
    cited_ids: list[str] = Field(default_factory=list, description="the evidence ids the answer rests on")
    source: str = Field(description="'extractive', 'llm:<provider>', or 'unavailable' (Redis down)")
    evidence: list[EvidenceOut]
    evidence_ids: list[str]
    available: bool = Field(default=True, description="false when Redis is down (no evidence could be read)")


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
    valid_from: int | None = Field(default=None, description="when it was first stated (ms)")
    valid_until: int | None = Field(default=None, description="when a later edge replaced it (ms); null: current")
    superseded_by: str | None = Field(default=None, description="the edge that replaced it")


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


class ProvidersOut(ApiModel):
    """Which providers are active: the LLM slots, NER and NLI (never loads a model to tell)."""

    llm: dict[str, LlmSlotOut]
    ner: ModelBackendOut
    nli: ModelBackendOut


class HealthOut(ApiModel):
    status: Literal["ok", "degraded"]
    degraded: list[str] = Field(description="the tiers that are down")
    tiers: TiersOut
    checks: ChecksOut
    llm: LlmOut
    providers: ProvidersOut = Field(description="which model serves each LLM slot, NER and NLI, and why not")


# -- memories (CRUD over the semantic tier) ----------------------------------------------
_MEMORY_EXAMPLE: dict[str, Any] = {
    "id": "mem-5f2c0a9e1b7d3c44",
    "text": "User lives in Berlin",
    "kind": "fact",
    "sourceEpisodeIds": ["ep-0123456789ab"],
    "createdAt": 1710500000000,
    "importance": 0.5,
    "validFrom": 1710500000000,
    "validUntil": None,
    "supersededBy": None,
    "current": True,
}


class MemoryIn(BaseModel):
    """A memory written directly ("remember that I take my coffee black")."""

    model_config = _examples(
        {"text": "User takes their coffee black", "kind": "preference"},
        {"text": "User lives in Berlin", "kind": "fact", "source": "onboarding", "valid_from": 1709251200000},
    )
    text: str = Field(min_length=1, max_length=20_000, pattern=r"\S", description="one fact or preference")
    kind: Literal["fact", "preference"] = "fact"
    source: str | None = Field(default=None, pattern=RECORD_ID, description="where it comes from (an episode id…)")
    valid_from: int | None = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when it became true (ms); now when absent"
    )
    valid_until: int | None = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when it stopped being true (ms); current when absent"
    )

    @model_validator(mode="after")
    def _ordered(self) -> MemoryIn:
        if self.valid_from is not None and self.valid_until is not None and self.valid_until < self.valid_from:
            raise ValueError("valid_until must not be before valid_from")
        return self


class MemoryUpdate(BaseModel):
    """Fields to change; at least one. ``valid_until: null`` makes a closed memory current again."""

    model_config = _examples({"text": "User takes their coffee with oat milk"}, {"valid_until": 1717200000000})
    text: str | None = Field(default=None, min_length=1, max_length=20_000, pattern=r"\S")
    kind: Literal["fact", "preference"] | None = None
    valid_from: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)
    valid_until: int | None = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)

    @model_validator(mode="after")
    def _something(self) -> MemoryUpdate:
        if not self.model_fields_set:
            raise ValueError("send at least one of text, kind, valid_from, valid_until")
        if any(getattr(self, f) is None for f in self.model_fields_set - {"valid_until"}):
            raise ValueError("only valid_until may be null")
        return self


class MemoryOut(ApiModel):
    """A semantic memory with its validity: ``validUntil`` null means it is current."""

    model_config = ConfigDict(json_schema_extra={"examples": [_MEMORY_EXAMPLE]})
    id: str
    text: str
    kind: str
    source_episode_ids: list[str]
    created_at: int = Field(description="when it was learned (ms)")
    importance: float
    valid_from: int = Field(description="when it became true or was stated (ms)")
    valid_until: int | None = Field(description="when a later fact replaced it (ms); null: current")
    superseded_by: str | None = Field(description="the memory that replaced it")
    current: bool


class MemoryWriteOut(ApiModel):
    """201: stored as a new memory; 200: folded into the near-duplicate ``mergedInto``."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"memory": _MEMORY_EXAMPLE, "created": True}]})
    memory: MemoryOut
    created: bool
    merged_into: str | None = Field(default=None, description="the stored memory it was merged into")


class MemoriesOut(ApiModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"memories": [_MEMORY_EXAMPLE], "count": 1, "total": 1, "available": True}]}
    )
    memories: list[MemoryOut]
    count: int
    total: int | None = Field(default=None, description="memories of the kind asked for (a search is not counted)")
    query: str | None = None
    available: bool = Field(description="false when Redis is down (the list is then empty)")


class MemoryChangeOut(ApiModel):
    """One change of a memory: when, where from (origin) and what (action)."""

    memory_id: str
    at: int = Field(description="when it was recorded (ms)")
    origin: Literal["extracted", "user", "lint", "supersession", "import"]
    action: Literal["created", "restated", "edited", "merged", "superseded", "supersedes", "reopened"]
    text: str | None = Field(default=None, description="the text after the change (none once deleted)")
    related_id: str | None = Field(default=None, description="the other memory: merged, superseding or superseded")
    source_episode_id: str | None = None
    valid_from: int | None = None
    valid_until: int | None = None


class MemoryHistoryOut(ApiModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "memoryId": "mem-5f2c0a9e1b7d3c44",
                    "changes": [
                        {
                            "memoryId": "mem-5f2c0a9e1b7d3c44",
                            "at": 1704700000000,
                            "origin": "extracted",
                            "action": "created",
                            "text": "User lives in London",
                        },
                        {
                            "memoryId": "mem-5f2c0a9e1b7d3c44",
                            "at": 1710500000000,
                            "origin": "supersession",
                            "action": "superseded",
                            "relatedId": "mem-9a8b7c6d5e4f3a2b",
                            "validUntil": 1710500000000,
                        },
                    ],
                    "count": 2,
                }
            ]
        }
    )
    memory_id: str
    changes: list[MemoryChangeOut]
    count: int


class MemoryDeletedOut(ApiModel):
    deleted: str = Field(description="the id of the deleted memory")
