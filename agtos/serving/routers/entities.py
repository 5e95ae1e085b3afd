"""Entity memory: list and search, stats, edit, soft delete, merge and per-entity views."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from starlette.convertors import StringConvertor, register_url_convertor

from agtos.memory.entity_graph import EntityConflict, EntityInvalid, EntityNotFound
from agtos.memory.entity_views import EntityViews
from agtos.schemas import Conclusion, EntityType
from agtos.schemas.api import (
    EntityConclusionsOut,
    EntityDeletedOut,
    EntityEnvelope,
    EntityEpisodesOut,
    EntityMergeOut,
    EntityOut,
    EntityPageOut,
    EntityRelationshipsOut,
    EntityStatsOut,
    EntityUpdate,
    EpisodeOut,
    MergeCountsOut,
    MergeRequest,
)
from agtos.serving.deps import Coordinator, UserId, id_path
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.lock_waits import first_lock_bounded
from agtos.serving.routers.insight import conclusions_out
from agtos.serving.strict_json import StrictJSONRoute
from agtos.storage.redis_conn import StorageUnavailable

EntityId = Annotated[str, id_path("the entity's id")]


class EntityIdSegment(StringConvertor):
    """The ``{entity_id}`` segment: any but ``stats``, the concrete path beside it. OpenAPI matches a concrete
    path before a template, so ``PUT``/``DELETE /api/entities/stats`` are not documented; routed as entity ids
    they were a 404 for an entity "stats" (never an entity's id: those are ``ent-…``) while ``Allow`` named PUT
    and DELETE there. Now they are a 405 whose ``Allow`` is the stats path's GET."""

    regex = "(?!stats$)[^/]+"


register_url_convertor("entity_id", EntityIdSegment())

router = APIRouter(prefix="/api/entities", tags=["entities"], responses=USER_ERRORS, route_class=StrictJSONRoute)
NOT_FOUND = errors(404)


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


@router.get("", response_model=EntityPageOut)
def list_entities(
    coordinator: Coordinator,
    user_id: UserId,
    q: Annotated[str | None, Query(max_length=256, description="name or alias search")] = None,
    type: Annotated[EntityType | None, Query(description="only this entity type")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    offset: Annotated[int, Query(ge=0, le=100_000, description="from a previous nextOffset")] = 0,
) -> EntityPageOut:
    """Live entities: name matches (exact, prefix, substring) for ``q``, else most recently seen first."""
    try:
        page = _views(coordinator).page(user_id, q, type, limit, offset)
    except StorageUnavailable:
        return EntityPageOut(entities=[], count=0, total=0, offset=offset, next_offset=None, available=False)
    return EntityPageOut(
        entities=[EntityOut.model_validate(e) for e in page.entities],
        count=len(page.entities),
        total=page.total,
        offset=page.offset,
        next_offset=page.next_offset,
        available=True,
    )


@router.get("/stats", response_model=EntityStatsOut)
def entity_stats(coordinator: Coordinator, user_id: UserId) -> EntityStatsOut:
    """Counts of live entities by type."""
    try:
        counts = _views(coordinator).counts(user_id)
    except StorageUnavailable:
        return EntityStatsOut(total=0, by_type={}, available=False)
    return EntityStatsOut(total=sum(counts.values()), by_type=counts, available=True)


@router.get("/{entity_id:entity_id}", response_model=EntityEnvelope, responses=NOT_FOUND)
def get_entity(coordinator: Coordinator, user_id: UserId, entity_id: EntityId) -> EntityEnvelope:
    with _entity_errors():
        return EntityEnvelope(entity=EntityOut.model_validate(_views(coordinator).get(user_id, entity_id)))


@router.put("/{entity_id:entity_id}", response_model=EntityEnvelope, responses=errors(404, 409, 413))
def put_entity(coordinator: Coordinator, user_id: UserId, entity_id: EntityId, body: EntityUpdate) -> EntityEnvelope:
    """Edit name, type, aliases or confidence (409 when a name/alias belongs to another entity)."""
    with _entity_errors():
        entity = coordinator.entities.update(user_id, entity_id, body.model_dump(exclude_unset=True))
    return EntityEnvelope(entity=EntityOut.model_validate(entity))


@router.delete("/{entity_id:entity_id}", response_model=EntityDeletedOut, responses=NOT_FOUND)
def delete_entity(coordinator: Coordinator, user_id: UserId, entity_id: EntityId) -> EntityDeletedOut:
    """Soft delete: hidden from lists, stats and dedup lookups."""
    with _entity_errors():
        entity = coordinator.entities.delete(user_id, entity_id)
    return EntityDeletedOut(id=entity.id, deleted=True)


@router.post("/{entity_id}/merge", response_model=EntityMergeOut, responses=errors(404, 409, 413))
def merge_entity(coordinator: Coordinator, user_id: UserId, entity_id: EntityId, body: MergeRequest) -> EntityMergeOut:
    """Fold ``duplicate_id`` into this entity: aliases, episodes and relationships move over."""
    with _entity_errors(), first_lock_bounded():
        report = coordinator.entities.merge(user_id, entity_id, body.duplicate_id)
    return EntityMergeOut(
        entity=EntityOut.model_validate(report.survivor),
        merged=report.duplicate_id,
        relationships=MergeCountsOut.model_validate(report),
    )


@router.get("/{entity_id}/episodes", response_model=EntityEpisodesOut, responses=NOT_FOUND)
def entity_episodes(coordinator: Coordinator, user_id: UserId, entity_id: EntityId) -> EntityEpisodesOut:
    """The stored episodes that mention the entity, newest first."""
    with _entity_errors():
        episodes = _views(coordinator).episodes(user_id, entity_id)
    return EntityEpisodesOut(
        entity_id=entity_id, episodes=[EpisodeOut.model_validate(e) for e in episodes], count=len(episodes)
    )


@router.get("/{entity_id}/conclusions", response_model=EntityConclusionsOut, responses=NOT_FOUND)
def entity_conclusions(
    coordinator: Coordinator,
    user_id: UserId,
    entity_id: EntityId,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> EntityConclusionsOut:
    """Conclusions whose text names the entity or one of its aliases."""
    with _entity_errors():
        records = _views(coordinator).conclusions(user_id, entity_id, limit)
        found = conclusions_out(coordinator, user_id, [Conclusion.model_validate(r) for r in records])
    return EntityConclusionsOut(entity_id=entity_id, conclusions=found, count=len(found))


@router.get("/{entity_id}/relationships", response_model=EntityRelationshipsOut, responses=NOT_FOUND)
def entity_relationships(coordinator: Coordinator, user_id: UserId, entity_id: EntityId) -> EntityRelationshipsOut:
    """Edges in and out, each with the other entity's id, name and type."""
    with _entity_errors():
        edges = _views(coordinator).relationships(user_id, entity_id)
    return EntityRelationshipsOut.model_validate({"entityId": entity_id, "relationships": edges, "count": len(edges)})
