"""Memory CRUD: write, list or search, read, edit and delete semantic memories, and their history."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status

from agtos.schemas import Memory, MemoryKind
from agtos.schemas.api import (
    MAX_QUERY_CHARS,
    MemoriesOut,
    MemoryChangeOut,
    MemoryDeletedOut,
    MemoryHistoryOut,
    MemoryIn,
    MemoryOut,
    MemoryUpdate,
    MemoryWriteOut,
)
from agtos.serving.deps import Coordinator, UserId, id_path
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.lock_waits import first_lock_bounded
from agtos.serving.strict_json import StrictJSONRoute
from agtos.storage.redis_conn import StorageUnavailable

router = APIRouter(prefix="/api/memory/memories", tags=["memories"], responses=USER_ERRORS, route_class=StrictJSONRoute)
MemoryId = Annotated[str, id_path("the memory's id")]
MERGED: dict[int | str, dict[str, Any]] = {
    200: {"model": MemoryWriteOut, "description": "Merged into a stored near-duplicate"}
}


def memories_out(coordinator: Coordinator, user_id: str, memories: list[Memory]) -> list[MemoryOut]:
    """The memories with the sessions of their source episodes (one batched read for all)."""
    sessions = coordinator.source_session_ids(user_id, [m.source_episode_ids for m in memories])
    return [
        MemoryOut.model_validate(m).model_copy(update={"source_session_ids": s})
        for m, s in zip(memories, sessions, strict=True)
    ]


def memory_out(coordinator: Coordinator, user_id: str, memory: Memory) -> MemoryOut:
    return memories_out(coordinator, user_id, [memory])[0]


@router.post(
    "",
    response_model=MemoryWriteOut,
    status_code=status.HTTP_201_CREATED,
    responses=MERGED | errors(403, 413),
)
def create_memory(coordinator: Coordinator, user_id: UserId, body: MemoryIn, response: Response) -> MemoryWriteOut:
    """Store a fact or preference (201), or fold it into the stored memory whose words it repeats
    (token-set Jaccard ≥ the lint's threshold: 200 with ``mergedInto``). A fact that a stored one of
    the same subject and attribute contradicts closes the earlier one (``validUntil``, ``supersededBy``)."""
    with first_lock_bounded():
        written = coordinator.create_memory(
            user_id, body.text, MemoryKind(body.kind), body.source, body.valid_from, body.valid_until
        )
    if not written.created:
        response.status_code = status.HTTP_200_OK
    return MemoryWriteOut(
        memory=memory_out(coordinator, user_id, written.memory),
        created=written.created,
        merged_into=written.merged_into,
    )


@router.get("", response_model=MemoriesOut)
def list_memories(
    coordinator: Coordinator,
    user_id: UserId,
    q: Annotated[
        str | None,
        Query(max_length=MAX_QUERY_CHARS, pattern=r"\S", description="search (hybrid); newest first without"),
    ] = None,
    kind: Annotated[Literal["fact", "preference", "pattern"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> MemoriesOut:
    """The user's memories, newest first by ``validFrom``; with ``q``, the best matches, current
    facts before superseded ones. ``available: false`` when Redis is down."""
    try:
        page = coordinator.list_memories(user_id, q, MemoryKind(kind) if kind else None, limit, offset)
        memories = memories_out(coordinator, user_id, page.memories)
    except StorageUnavailable:
        return MemoriesOut(memories=[], count=0, query=q, available=False)
    return MemoriesOut(memories=memories, count=len(memories), total=page.total, query=q, available=True)


@router.get("/{memory_id}", response_model=MemoryOut, responses=errors(404))
def get_memory(coordinator: Coordinator, user_id: UserId, memory_id: MemoryId) -> MemoryOut:
    return memory_out(coordinator, user_id, coordinator.get_memory(user_id, memory_id))


@router.put("/{memory_id}", response_model=MemoryOut, responses=errors(403, 404, 413))
def update_memory(coordinator: Coordinator, user_id: UserId, memory_id: MemoryId, body: MemoryUpdate) -> MemoryOut:
    """Change the text (re-indexed), kind or validity; the edit is kept in the history."""
    clear_until = "valid_until" in body.model_fields_set and body.valid_until is None
    with first_lock_bounded():
        memory = coordinator.update_memory(
            user_id,
            memory_id,
            body.text,
            MemoryKind(body.kind) if body.kind else None,
            body.valid_from,
            body.valid_until,
            clear_until,
        )
    return memory_out(coordinator, user_id, memory)


@router.delete("/{memory_id}", response_model=MemoryDeletedOut, responses=errors(403, 404))
def delete_memory(coordinator: Coordinator, user_id: UserId, memory_id: MemoryId) -> MemoryDeletedOut:
    """Remove it and its history from Redis and every index; facts it had superseded are current again."""
    with first_lock_bounded():
        coordinator.delete_memory(user_id, memory_id)
    return MemoryDeletedOut(deleted=memory_id)


@router.get("/{memory_id}/history", response_model=MemoryHistoryOut, responses=errors(404))
def memory_history(coordinator: Coordinator, user_id: UserId, memory_id: MemoryId) -> MemoryHistoryOut:
    """Every change, oldest first: extracted, restated, user edits, merges, supersession; 404 once deleted."""
    changes = [MemoryChangeOut.model_validate(c) for c in coordinator.memory_history(user_id, memory_id)]
    return MemoryHistoryOut(memory_id=memory_id, changes=changes, count=len(changes))
