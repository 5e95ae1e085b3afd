"""Record contracts: pydantic models (records) and matching pyarrow schemas (arrow)."""

from agtos.schemas.records import (
    Conclusion,
    ConclusionType,
    Entity,
    EntityType,
    Episode,
    EpisodeType,
    IngestItem,
    MaintenanceReport,
    Memory,
    MemoryKind,
    ProfileUpdate,
    Relationship,
    Role,
    Turn,
    UserProfile,
)

__all__ = [
    "Conclusion",
    "ConclusionType",
    "Entity",
    "EntityType",
    "Episode",
    "EpisodeType",
    "IngestItem",
    "MaintenanceReport",
    "Memory",
    "MemoryKind",
    "ProfileUpdate",
    "Relationship",
    "Role",
    "Turn",
    "UserProfile",
]
