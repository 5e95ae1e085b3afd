"""Responses of recall and insight: episodes, search, context, profile, conclusions, the Dreamer,
ask, Query-as-Ingest."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from agtos.schemas.api.response_base import ApiModel
from agtos.schemas.records import Conclusion, EpisodeType, UserProfile


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
    text: str = Field(
        description="the turn as said, relative dates resolved: 'yesterday [= 7 May 2023]'; a turn over 256 tokens"
        " is cut to its sentences that share the query's words (else the matched window), '…' where cut"
    )
    score: float = Field(description="0-1")


class SearchHitOut(EpisodeOut):
    session_id: str = Field(description="the session the episode was made of ('' for imported episodes)")
    score: float = Field(description="0-1 for every mode: the episode's best evidence (turns, summary, memories)")
    match_type: str
    highlights: list[HighlightOut] = Field(description="the session's turns that matched, best first")


DEGRADED = (
    "why the search was not the one asked for (keyword search only while the embedder is down; after an embedder"
    " change, the records not yet reindexed match by keyword only); null if not"
)


class SearchOut(ApiModel):
    query: str
    results: list[SearchHitOut]
    count: int
    available: bool
    degraded: str | None = Field(default=None, description=DEGRADED)


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
    degraded: str | None = Field(default=None, description=DEGRADED)


# -- insight ---------------------------------------------------------------------------
class ConclusionOut(Conclusion):
    """A conclusion as listed, with the sessions of its source episodes."""

    source_session_ids: list[str] = Field(
        default_factory=list,
        description="the sessions its source episodes were made of (none for a gone or imported episode)",
    )


class ConclusionsOut(ApiModel):
    conclusions: list[ConclusionOut]
    count: int
    available: bool = Field(default=True, description="false when Redis is down (the list is then empty)")


class ConclusionDeletedOut(ApiModel):
    deleted: str = Field(description="the id of the deleted conclusion")


class DreamOut(ApiModel):
    user_id: str
    episodes: int = Field(description="episodes consolidated")
    conclusions: list[ConclusionOut]
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
    degraded: str | None = Field(default=None, description=DEGRADED)


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
