"""Requests and responses of the memories routes (CRUD over the semantic tier) and their history."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from agtos.schemas.api.request_bodies import OptionalJSONInt, RequestModel, request_config
from agtos.schemas.api.response_base import ApiModel
from agtos.schemas.identifiers import RecordId
from agtos.schemas.records import MAX_TIMESTAMP_MS

_MEMORY_EXAMPLE: dict[str, Any] = {
    "id": "mem-5f2c0a9e1b7d3c44",
    "text": "User lives in Berlin",
    "kind": "fact",
    "sourceEpisodeIds": ["ep-0123456789ab"],
    "sourceSessionIds": ["sess-42"],
    "createdAt": 1710500000000,
    "importance": 0.5,
    "validFrom": 1710500000000,
    "validUntil": None,
    "supersededBy": None,
    "current": True,
}


class MemoryIn(RequestModel):
    """A memory written directly ("remember that I take my coffee black")."""

    model_config = request_config(
        {"text": "User takes their coffee black", "kind": "preference"},
        {"text": "User lives in Berlin", "kind": "fact", "source": "onboarding", "valid_from": 1709251200000},
    )
    text: str = Field(min_length=1, max_length=20_000, pattern=r"\S", description="one fact or preference")
    kind: Literal["fact", "preference"] = "fact"
    source: RecordId | None = Field(default=None, description="where it comes from (an episode id…)")
    valid_from: OptionalJSONInt = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when it became true (ms); now when absent"
    )
    valid_until: OptionalJSONInt = Field(
        default=None, ge=0, le=MAX_TIMESTAMP_MS, description="when it stopped being true (ms); current when absent"
    )
    cross_field_rules = ("valid_until must not be before valid_from",)

    @model_validator(mode="after")
    def _ordered(self) -> MemoryIn:
        if self.valid_from is not None and self.valid_until is not None and self.valid_until < self.valid_from:
            raise ValueError(self.cross_field_rules[0])
        return self


class MemoryUpdate(RequestModel):
    """Fields to change; at least one. ``valid_until: null`` makes a closed memory current again."""

    model_config = request_config(
        {"text": "User takes their coffee with oat milk"}, {"valid_until": 1717200000000}, min_fields=1
    )
    text: str | None = Field(default=None, min_length=1, max_length=20_000, pattern=r"\S")
    kind: Literal["fact", "preference"] | None = None
    valid_from: OptionalJSONInt = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)
    valid_until: OptionalJSONInt = Field(default=None, ge=0, le=MAX_TIMESTAMP_MS)
    cross_field_rules = ("send at least one of text, kind, valid_from, valid_until", "only valid_until may be null")

    @model_validator(mode="after")
    def _something(self) -> MemoryUpdate:
        if not self.model_fields_set:
            raise ValueError(self.cross_field_rules[0])
        if any(getattr(self, f) is None for f in self.model_fields_set - {"valid_until"}):
            raise ValueError(self.cross_field_rules[1])
        return self


class MemoryOut(ApiModel):
    """A semantic memory with its validity: ``validUntil`` null means it is current."""

    model_config = ConfigDict(json_schema_extra={"examples": [_MEMORY_EXAMPLE]})
    id: str
    text: str
    kind: str
    source_episode_ids: list[str]
    source_session_ids: list[str] = Field(
        default_factory=list,
        description="the sessions its source episodes were made of (none for a gone or imported episode)",
    )
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
