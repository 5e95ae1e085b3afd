"""Entity memory: list and search, stats, edit, soft delete, merge and per-entity views."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agtos.memory.entities import EntityConflict, EntityInvalid, EntityNotFound
from agtos.memory.entity_views import EntityViews, entity_public
from agtos.schemas import EntityType
from agtos.serving.deps import Coordinator, UserId
from agtos.storage.redis_conn import StorageUnavailable

router = APIRouter(prefix="/api/entities", tags=["entities"])


class EntityUpdate(BaseModel):
    """Fields to change; at least one. A rename keeps the old name as an alias unless ``aliases`` is sent."""

    model_config = ConfigDict(extra="forbid")
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
    model_config = ConfigDict(extra="forbid")
    duplicate_id: str = Field(min_length=1, max_length=128, description="the entity folded into this one")

    @field_validator("duplicate_id")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


@contextmanager
def _entity_errors() -> Iterator[None]:
    """Entity errors as HTTP: unknown id 404, conflicting alias 409, impossible edit 422."""
    try:
        yield
    except EntityNotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    except EntityConflict as exc:
        raise HTTPException(409, str(exc)) from exc
    except EntityInvalid as exc:
        raise HTTPException(422, str(exc)) from exc


def _views(coordinator: Coordinator) -> EntityViews:
    return EntityViews(coordinator.entities)


@router.get("")
def list_entities(
    coordinator: Coordinator,
    user_id: UserId,
    q: Annotated[str | None, Query(max_length=256, description="name or alias search")] = None,
    type: Annotated[EntityType | None, Query(description="only this entity type")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=100_000, description="from a previous nextOffset")] = 0,
) -> dict[str, Any]:
    """Live entities: name matches (exact, prefix, substring) for ``q``, else most recently seen first."""
    try:
        page = _views(coordinator).page(user_id, q, type, limit, offset)
    except StorageUnavailable:
        return {"entities": [], "count": 0, "total": 0, "offset": offset, "nextOffset": None, "available": False}
    return page.public()


@router.get("/stats")
def entity_stats(coordinator: Coordinator, user_id: UserId) -> dict[str, Any]:
    """Counts of live entities by type."""
    try:
        return _views(coordinator).stats(user_id)
    except StorageUnavailable:
        return {"total": 0, "byType": {}, "available": False}


@router.get("/{entity_id}")
def get_entity(coordinator: Coordinator, user_id: UserId, entity_id: str) -> dict[str, Any]:
    with _entity_errors():
        return {"entity": entity_public(_views(coordinator).get(user_id, entity_id))}


@router.put("/{entity_id}")
def put_entity(coordinator: Coordinator, user_id: UserId, entity_id: str, body: EntityUpdate) -> dict[str, Any]:
    """Edit name, type, aliases or confidence (409 when a name/alias belongs to another entity)."""
    with _entity_errors():
        entity = coordinator.entities.update(user_id, entity_id, body.model_dump(exclude_unset=True))
    return {"entity": entity_public(entity)}


@router.delete("/{entity_id}")
def delete_entity(coordinator: Coordinator, user_id: UserId, entity_id: str) -> dict[str, Any]:
    """Soft delete: hidden from lists, stats and dedup lookups."""
    with _entity_errors():
        entity = coordinator.entities.delete(user_id, entity_id)
    return {"id": entity.id, "deleted": True}


@router.post("/{entity_id}/merge")
def merge_entity(coordinator: Coordinator, user_id: UserId, entity_id: str, body: MergeRequest) -> dict[str, Any]:
    """Fold ``duplicate_id`` into this entity: aliases, episodes and relationships move over."""
    with _entity_errors():
        report = coordinator.entities.merge(user_id, entity_id, body.duplicate_id)
    return {
        "entity": entity_public(report.survivor),
        "merged": report.duplicate_id,
        "relationships": {"moved": report.moved, "merged": report.merged, "dropped": report.dropped},
    }


@router.get("/{entity_id}/episodes")
def entity_episodes(coordinator: Coordinator, user_id: UserId, entity_id: str) -> dict[str, Any]:
    """The stored episodes that mention the entity, newest first."""
    with _entity_errors():
        episodes = _views(coordinator).episodes(user_id, entity_id)
    return {"entityId": entity_id, "episodes": [e.public() for e in episodes], "count": len(episodes)}


@router.get("/{entity_id}/conclusions")
def entity_conclusions(
    coordinator: Coordinator,
    user_id: UserId,
    entity_id: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """Conclusions whose text names the entity or one of its aliases."""
    with _entity_errors():
        found = _views(coordinator).conclusions(user_id, entity_id, limit)
    return {"entityId": entity_id, "conclusions": found, "count": len(found)}


@router.get("/{entity_id}/relationships")
def entity_relationships(coordinator: Coordinator, user_id: UserId, entity_id: str) -> dict[str, Any]:
    """Edges in and out, each with the other entity's id, name and type."""
    with _entity_errors():
        edges = _views(coordinator).relationships(user_id, entity_id)
    return {"entityId": entity_id, "relationships": edges, "count": len(edges)}
