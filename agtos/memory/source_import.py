"""Import other tools' chat history and memory files as episodes and memories (idempotent)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agtos.memory.episodic import session_episode_id
from agtos.memory.ingestion_pipeline import IngestionReport
from agtos.schemas import IngestItem, Memory
from agtos.tasks.distil import memory_kind

if TYPE_CHECKING:
    from agtos.memory.services import Services

Ingest = Callable[[list[IngestItem]], IngestionReport]


def import_sources(
    rt: Services, ingest: Ingest, user_id: str, sources: list[str] | None = None, home: Path | None = None
) -> dict[str, Any]:
    """Sessions found under ``home`` go through ``ingest``; memory files become semantic memories."""
    from agtos.importers import collect

    found = collect(home or rt.settings.import_home, sources)
    items = [IngestItem(user_id=user_id, session_id=s.session_key, turns=s.turns) for s in found.sessions]
    existing = rt.episodes.existing_ids(user_id, [session_episode_id(user_id, i.session_id) for i in items])
    report = ingest(items) if items else None
    memories = [
        Memory(id=m.key, user_id=user_id, text=m.text[:20_000], kind=memory_kind(m.text)) for m in found.memories
    ]
    known_memories = set(rt.semantic.records("memory", user_id, [m.id for m in memories]))
    if memories:
        rt.semantic.store_batch([], memories, rt.semantic.embed_or_none([m.text for m in memories]))
    stored = report.episode_ids if report else []
    return {
        "sessions": len(items),
        "episodesAdded": len([i for i in stored if i not in existing]),
        "episodesUpdated": len([i for i in stored if i in existing]),
        "skipped": report.skipped if report else [],
        "memoriesAdded": len([m for m in memories if m.id not in known_memories]),
        "warnings": found.warnings,
    }
