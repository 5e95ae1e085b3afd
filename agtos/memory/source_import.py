"""Import other tools' chat history and memory files as episodes and memories (idempotent).

``import_sources`` is the one way from the importers to storage: everything they found (turns,
session titles, memory items, warnings) goes through ``redact_found`` before anything is stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agtos.importers.base import ImportedMemory, ImportedSession, ParseResult, make_turn, memory_key
from agtos.memory.episodic import session_episode_id
from agtos.memory.ingestion_pipeline import IngestionReport
from agtos.schemas import IngestItem, Memory
from agtos.schemas.records import Role, Turn
from agtos.tasks.distil import memory_kind
from agtos.tasks.secret_redaction import redact_secrets

if TYPE_CHECKING:
    from agtos.memory.services import Services

Ingest = Callable[[list[IngestItem]], IngestionReport]


def _redact_turn(turn: Turn) -> Turn:
    content = redact_secrets(turn.content)
    if content == turn.content:
        return turn
    clean = make_turn(Role(turn.role), content, turn.timestamp, turn.name, turn.is_summary)
    return clean or turn.model_copy(update={"content": "[REDACTED]"})


def _redact_session(session: ImportedSession) -> ImportedSession:
    title = redact_secrets(session.title) if session.title else session.title
    return session.model_copy(update={"turns": [_redact_turn(t) for t in session.turns], "title": title})


def _redact_memory(memory: ImportedMemory) -> ImportedMemory:
    """The item with its secrets replaced; the key is derived from the redacted text (no hash of a secret)."""
    text = redact_secrets(memory.text)
    if text == memory.text:
        return memory
    return memory.model_copy(update={"text": text, "key": memory_key(memory.source, memory.source_path, text)})


def redact_found(found: ParseResult) -> ParseResult:
    """Everything the importers found with secrets (keys, tokens, passwords, private keys) redacted."""
    redacted = ParseResult(warnings=[redact_secrets(w) for w in found.warnings])
    redacted.merge(
        ParseResult(
            sessions=[_redact_session(s) for s in found.sessions],
            memories=[_redact_memory(m) for m in found.memories],
        )
    )
    return redacted


def import_sources(
    rt: Services, ingest: Ingest, user_id: str, sources: list[str] | None = None, home: Path | None = None
) -> dict[str, Any]:
    """Sessions found under ``home`` go through ``ingest``; memory files become semantic memories."""
    from agtos.importers import collect

    found = redact_found(collect(home or rt.settings.import_home, sources))
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
