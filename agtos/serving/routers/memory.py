"""Episodic reads, search and the profile."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import ProfileUpdate, UserProfile
from agtos.schemas.api import (
    MAX_QUERY_CHARS,
    ContextOut,
    ContextRequest,
    EpisodeOut,
    EpisodesOut,
    ProfileOut,
    SearchOut,
)
from agtos.serving.deps import Coordinator, UserId
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.lock_waits import first_lock_bounded
from agtos.serving.offload import in_read_thread, in_thread
from agtos.serving.responses import json_model
from agtos.serving.strict_json import StrictJSONRoute
from agtos.storage.redis_conn import StorageUnavailable

router = APIRouter(prefix="/api/memory", tags=["memory"], responses=USER_ERRORS, route_class=StrictJSONRoute)

EPISODE_FIELDS = tuple(EpisodeOut.model_fields)  # what a search hit shows of its episode


@router.get("/episodes", response_model=EpisodesOut)
async def list_episodes(
    coordinator: Coordinator,
    user_id: UserId,
    limit: Annotated[int, Query(ge=1, le=100, description="how many, newest first")] = 20,
) -> EpisodesOut:
    """The user's episodes, newest first; ``available: false`` when Redis is down."""
    try:
        episodes = await in_read_thread(coordinator.list_episodes, user_id, limit)
    except StorageUnavailable:
        return EpisodesOut(episodes=[], count=0, available=False)
    return EpisodesOut(episodes=[EpisodeOut.model_validate(e) for e in episodes], count=len(episodes), available=True)


@router.get("/search", response_model=SearchOut)
async def search(
    coordinator: Coordinator,
    user_id: UserId,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, pattern=r"\S", description="query")],
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
    mode: Annotated[
        Literal["hybrid", "vector", "bm25"] | None,
        Query(description="override AGTOS_MEMORY_SEARCH_MODE for this call"),
    ] = None,
) -> Response:
    """Search the user's episodes (hybrid BM25 + vector by default)."""
    return await in_thread(_search, coordinator, user_id, q, limit, mode)


def _search(coordinator: MemoryCoordinator, user_id: str, q: str, limit: int, mode: str | None) -> Response:
    try:
        hits, degraded = coordinator.search(user_id, q, limit, mode)
    except StorageUnavailable:
        return json_model(SearchOut(query=q, results=[], count=0, available=False))
    # validated once, as one document (each hit's episode fields read off the episode, its highlights
    # from their attributes): the same JSON as a model per hit and per highlight, at half the CPU
    results = [
        {
            **{name: getattr(h.episode, name) for name in EPISODE_FIELDS},
            "session_id": h.session_id,
            "score": h.score,
            "match_type": h.match_type,
            "highlights": h.highlights,
        }
        for h in hits
    ]
    return json_model(
        SearchOut.model_validate(
            {"query": q, "results": results, "count": len(results), "available": True, "degraded": degraded}
        )
    )


@router.get("/profile", response_model=ProfileOut)
def get_profile(coordinator: Coordinator, user_id: UserId) -> ProfileOut:
    try:
        profile = coordinator.get_profile(user_id)
    except StorageUnavailable:
        return ProfileOut(profile=UserProfile(user_id=user_id, updated_at=0), available=False)
    return ProfileOut(profile=profile, available=True)


@router.put("/profile", response_model=ProfileOut, responses=errors(403, 413))
def put_profile(coordinator: Coordinator, user_id: UserId, update: ProfileUpdate) -> ProfileOut:
    """Merge the given fields into the profile (fields not sent stay as they are)."""
    with first_lock_bounded():
        profile = coordinator.update_profile(user_id, update)
    return ProfileOut(profile=profile, available=True)


@router.post("/context", response_model=ContextOut, responses=errors(413))
async def context(coordinator: Coordinator, user_id: UserId, body: ContextRequest) -> Response:
    """The memory section for the agent's system prompt, fitted to ``token_budget`` tokens."""
    return await in_thread(_context, coordinator, user_id, body)


def _context(coordinator: MemoryCoordinator, user_id: str, body: ContextRequest) -> Response:
    return json_model(
        ContextOut.model_validate(
            coordinator.build_context(user_id, body.query, body.session_id, body.token_budget, body.limit)
        )
    )
