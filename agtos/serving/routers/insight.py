"""Conclusions, the Dreamer trigger, Dialectic ask, and Query-as-Ingest."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query

from agtos.schemas import Conclusion
from agtos.schemas.api import (
    AskOut,
    AskRequest,
    ConclusionDeletedOut,
    ConclusionOut,
    ConclusionsOut,
    DreamOut,
    ResponseIn,
    ResponseIngestOut,
)
from agtos.serving.deps import Coordinator, UserId, id_path
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.lock_waits import first_lock_bounded
from agtos.serving.strict_json import StrictJSONRoute
from agtos.storage.redis_conn import StorageUnavailable

router = APIRouter(prefix="/api/memory", tags=["insight"], responses=USER_ERRORS, route_class=StrictJSONRoute)


def conclusions_out(coordinator: Coordinator, user_id: str, items: list[Conclusion]) -> list[ConclusionOut]:
    """The conclusions with the sessions of their source episodes (one batched read for all)."""
    sessions = coordinator.source_session_ids(user_id, [c.source_episode_ids for c in items])
    return [ConclusionOut(**c.model_dump(), source_session_ids=s) for c, s in zip(items, sessions, strict=True)]


ConclusionKind = Literal["explicit", "deductive", "inductive", "abductive"]


@router.get("/conclusions", response_model=ConclusionsOut)
def list_conclusions(
    coordinator: Coordinator,
    user_id: UserId,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    type: Annotated[ConclusionKind | None, Query(description="only this conclusion type")] = None,
) -> ConclusionsOut:
    """The user's conclusions, most recently updated first; ``available: false`` when Redis is down."""
    try:
        out = conclusions_out(coordinator, user_id, coordinator.list_conclusions(user_id, limit, type))
    except StorageUnavailable:
        return ConclusionsOut(conclusions=[], count=0, available=False)
    return ConclusionsOut(conclusions=out, count=len(out))


@router.delete("/conclusions/{conclusion_id}", response_model=ConclusionDeletedOut, responses=errors(404))
def delete_conclusion(
    coordinator: Coordinator,
    user_id: UserId,
    conclusion_id: Annotated[str, id_path("the conclusion's id")],
) -> ConclusionDeletedOut:
    with first_lock_bounded():
        deleted = coordinator.delete_conclusion(user_id, conclusion_id)
    if not deleted:
        raise HTTPException(404, f"no conclusion {conclusion_id!r} for this user")
    return ConclusionDeletedOut(deleted=conclusion_id)


@router.post("/dream", response_model=DreamOut)
def dream(coordinator: Coordinator, user_id: UserId) -> DreamOut:
    """Consolidate the user's recent episodes now (it also runs by itself at every session end)."""
    with first_lock_bounded():  # its first lock is the merge's, after the LLM: nothing written before it
        report = coordinator.dream(user_id)
    return DreamOut(
        user_id=report.user_id,
        episodes=report.episodes,
        conclusions=conclusions_out(coordinator, user_id, report.conclusions),
        source=report.source,
        note=report.note,
    )


@router.post("/ask", response_model=AskOut, responses=errors(413))
def ask(coordinator: Coordinator, user_id: UserId, body: AskRequest) -> AskOut:
    """Dialectic: ask about the user; the answer comes with the ids of the evidence it used
    (``available: false`` and no answer when Redis is down)."""
    try:
        return AskOut.model_validate(coordinator.ask(user_id, body.question, body.limit))
    except StorageUnavailable:
        return AskOut(
            question=body.question,
            answer="Memory storage is unavailable right now; nothing about the user could be read.",
            source="unavailable",
            evidence=[],
            evidence_ids=[],
            available=False,
        )


@router.post("/responses", response_model=ResponseIngestOut, responses=errors(403, 413))
def ingest_response(coordinator: Coordinator, user_id: UserId, body: ResponseIn) -> ResponseIngestOut:
    """Query-as-Ingest: score an agent response and keep it as an episode when it is valuable."""
    return coordinator.ingest_response(
        user_id, body.session_id, body.response, body.query, body.tool_calls, body.reasoning_steps
    )
