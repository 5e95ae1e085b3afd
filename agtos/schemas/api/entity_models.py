"""Responses of the entity graph routes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, computed_field

from agtos.schemas.api.recall_models import ConclusionOut, EpisodeOut
from agtos.schemas.api.response_base import ApiModel
from agtos.schemas.records import EntityType


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
    conclusions: list[ConclusionOut]
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
