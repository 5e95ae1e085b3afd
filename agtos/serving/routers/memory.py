"""Episodic reads, search and the profile."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from agtos.schemas import ProfileUpdate, UserProfile
from agtos.serving.deps import Coordinator, UserId
from agtos.storage.redis_conn import StorageUnavailable

router = APIRouter(prefix="/api/memory", tags=["memory"])

MAX_QUERY_CHARS = 1_000


@router.get("/episodes")
def list_episodes(
    coordinator: Coordinator,
    user_id: UserId,
    limit: Annotated[int, Query(ge=1, le=100, description="how many, newest first")] = 20,
) -> dict[str, Any]:
    """The user's episodes, newest first; ``available: false`` when Redis is down."""
    try:
        episodes = coordinator.list_episodes(user_id, limit)
    except StorageUnavailable:
        return {"episodes": [], "count": 0, "available": False}
    return {"episodes": [e.public() for e in episodes], "count": len(episodes), "available": True}


@router.get("/search")
def search(
    coordinator: Coordinator,
    user_id: UserId,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S", description="query")],
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
    mode: Annotated[
        Literal["hybrid", "vector", "bm25"] | None,
        Query(description="override AGTOS_MEMORY_SEARCH_MODE for this call"),
    ] = None,
) -> dict[str, Any]:
    """Search the user's episodes (hybrid BM25 + vector by default)."""
    try:
        hits = coordinator.search_episodes(user_id, q, limit, mode)
    except StorageUnavailable:
        return {"query": q, "results": [], "count": 0, "available": False}
    return {"query": q, "results": [h.public() for h in hits], "count": len(hits), "available": True}


@router.get("/profile")
def get_profile(coordinator: Coordinator, user_id: UserId) -> dict[str, Any]:
    try:
        profile = coordinator.get_profile(user_id)
    except StorageUnavailable:
        return {"profile": UserProfile(user_id=user_id, updated_at=0).model_dump(), "available": False}
    return {"profile": profile.model_dump(), "available": True}


@router.put("/profile")
def put_profile(coordinator: Coordinator, user_id: UserId, update: ProfileUpdate) -> dict[str, Any]:
    """Merge the given fields into the profile (fields not sent stay as they are)."""
    return {"profile": coordinator.update_profile(user_id, update).model_dump(), "available": True}


class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S")
    session_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    token_budget: int = Field(default=800, ge=50, le=8_000)
    limit: int = Field(default=10, ge=1, le=50)


@router.post("/context")
def context(coordinator: Coordinator, user_id: UserId, body: ContextRequest) -> dict[str, Any]:
    """The memory section for the agent's system prompt, fitted to ``token_budget`` tokens."""
    return coordinator.build_context(user_id, body.query, body.session_id, body.token_budget, body.limit)
