"""Responses of live sessions and conversation ingests."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agtos.schemas.api.recall_models import EpisodeOut
from agtos.schemas.api.response_base import ApiModel
from agtos.schemas.records import Turn


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


class LastEndOut(ApiModel):
    """A session's last end that took turns, as it stands now."""

    episode_id: str | None = Field(description="the episode its turns became (null when skipped)")
    status: Literal["done", "queued", "skipped", "gone"] = Field(
        description="done: the episode is stored; queued: its job is still in the ingestion queue; skipped: "
        "not worth an episode (see reason); gone: neither stored nor queued now (expired, or dropped because the user "
        "opted out; forgetting the episode deletes this record, its id included)"
    )
    saved: bool = Field(description="whether that end kept the session (an episode)")
    reason: str = Field(description="that end's reason")
    turns_accepted: int = Field(description="the turns that end took")
    ended_at: int = Field(description="when it ended (ms since the epoch)")


class SessionEndOut(ApiModel):
    """What a session end accepted, and when its episode will be searchable."""

    session_id: str
    saved: bool
    reason: str
    episode: EpisodeOut | None = Field(description="the stored episode; null while queued or when not saved")
    episode_id: str | None = Field(None, description="the episode the session becomes (known before it is stored)")
    status: Literal["done", "queued", "skipped"] = Field(
        "done",
        description="done: stored and searchable; queued: held durably, a worker will store it (queue mode: "
        "at once under concurrent requests, with no live worker or with ?wait=0; an end without ?wait that is "
        "the only request in flight waits up to AGTOS_END_IDLE_WAIT_S for done); skipped",
    )
    turns_accepted: int = Field(0, description="the session's turns taken into the episode (or its queued job)")
    queue_position: int | None = Field(None, description="jobs in the ingestion queue up to this one")
    searchable_in_s: float | None = Field(
        None, description="estimated seconds until searchable (position x mean job time / live workers), or null"
    )
    last_end: LastEndOut | None = Field(
        None,
        exclude_if=lambda value: value is None,
        description="only on an end that found no turns (reason 'session has no turns'): the session's last end "
        "that took turns, within AGTOS_SESSION_JOURNAL_TTL_HOURS (a retry after a lost answer, or an end after "
        "the idle sweeper's, learns which episode the turns went to); absent otherwise",
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
