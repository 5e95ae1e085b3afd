"""Import other tools' chat history and memory files as episodes and memories (idempotent).

``import_sources`` is the one way from the importers to storage: everything they found (turns,
session titles, memory items, warnings) goes through ``redact_found`` before anything is stored."""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agtos.importers.base import ImportedMemory, ParseResult, make_turn, memory_key
from agtos.memory.episodic import session_episode_id
from agtos.memory.ingest_worker import existing_episodes
from agtos.memory.ingestion_pipeline import FORGOTTEN, OPTED_OUT, IngestionReport
from agtos.memory.privacy_controls import NotFoundError
from agtos.schemas import IngestItem, Memory
from agtos.schemas.records import Role, Turn
from agtos.tasks.distil import memory_kind
from agtos.tasks.secret_redaction import redact_all

if TYPE_CHECKING:
    from agtos.memory.services import Services

Ingest = Callable[[list[IngestItem]], IngestionReport]
NOT_FINAL = (FORGOTTEN, OPTED_OUT)  # skip reasons after which an import tries the session again


def _redacted_turn(turn: Turn, content: str) -> Turn:
    if content == turn.content:
        return turn
    clean = make_turn(Role(turn.role), content, turn.timestamp, turn.name, turn.is_summary)
    return clean or turn.model_copy(update={"content": "[REDACTED]"})


def _redacted_memory(memory: ImportedMemory, text: str) -> ImportedMemory:
    """The item with its secrets replaced; the key is derived from the redacted text (no hash of a secret)."""
    if text == memory.text:
        return memory
    return memory.model_copy(update={"text": text, "key": memory_key(memory.source, memory.source_path, text)})


def redact_found(found: ParseResult) -> ParseResult:
    """Everything the importers found (turns, titles, memory items, warnings) with secrets redacted;
    a secret found anywhere in the import is redacted everywhere it recurs."""
    texts = [
        *(s.title or "" for s in found.sessions),
        *(t.content for s in found.sessions for t in s.turns),
        *(m.text for m in found.memories),
        *found.warnings,
    ]
    clean = iter(redact_all(texts))
    titles = [next(clean) or None for _ in found.sessions]
    sessions = [
        s.model_copy(update={"title": title, "turns": [_redacted_turn(t, next(clean)) for t in s.turns]})
        for s, title in zip(found.sessions, titles, strict=True)
    ]
    memories = [_redacted_memory(m, next(clean)) for m in found.memories]
    redacted = ParseResult(warnings=list(clean))
    redacted.merge(ParseResult(sessions=sessions, memories=memories))  # re-keyed memories may coincide
    return redacted


def turns_digest(turns: list[Turn]) -> str:
    """A digest of an imported session's turns as they would be stored (redacted)."""
    return hashlib.sha256("\n".join(t.model_dump_json() for t in turns).encode()).hexdigest()


def unstore_after_opt_out(
    rt: Services, user_id: str, report: IngestionReport, sessions: dict[str, str], before: set[str]
) -> None:
    """The user opted out while the import's sessions were ingested: the episodes it added are forgotten
    again, with what was learnt from them alone, and count as skipped for the opt-out (an import after
    opting back in takes them); ``sessions``: episode id -> session id; ``before``: the episodes stored
    before the import, which stay (one it updated was written before the opt-out landed: an opt-out
    landing first leaves it as it was, :func:`agtos.memory.ingestion_pipeline.index_batch`)."""
    added = [i for i in report.episode_ids if i not in before]
    for episode_id in added:
        with contextlib.suppress(NotFoundError):
            rt.privacy.forget_item(user_id, "episode", episode_id)
    report.skipped += [{"sessionId": sessions[i], "reason": OPTED_OUT} for i in added]
    report.episode_ids = [i for i in report.episode_ids if i in before]


def import_sources(
    rt: Services, ingest: Ingest, user_id: str, sources: list[str] | None = None, home: Path | None = None
) -> dict[str, Any]:
    """Sessions found under ``home`` go through ``ingest`` unless imported before with the same turns
    (``unchanged``: not summarised, embedded or written again); memory files become semantic
    memories, those already stored (same id: same redacted text) left as they are."""
    from agtos.importers import collect

    found = redact_found(collect(home or rt.settings.import_home, sources))
    items = [IngestItem(user_id=user_id, session_id=s.session_key, turns=s.turns) for s in found.sessions]
    digests = {session_episode_id(user_id, i.session_id): turns_digest(i.turns) for i in items}
    unchanged = rt.episodes.unchanged_imports(user_id, digests)
    fresh = [i for i in items if session_episode_id(user_id, i.session_id) not in unchanged]
    existing = existing_episodes(rt, [(user_id, session_episode_id(user_id, i.session_id)) for i in fresh])
    report = ingest(fresh) if fresh else None
    opted_out = rt.privacy.is_opted_out(user_id, fresh=True)  # while the import ran: it keeps nothing
    if report and report.episode_ids and opted_out:
        sessions = {session_episode_id(user_id, i.session_id): i.session_id for i in fresh}
        unstore_after_opt_out(rt, user_id, report, sessions, existing)
    memories = [
        Memory(id=m.key, user_id=user_id, text=m.text[:20_000], kind=memory_kind(m.text)) for m in found.memories
    ]
    if opted_out:
        memories = []
    known_memories = set(rt.semantic.records("memory", user_id, [m.id for m in memories]))
    new_memories = [m for m in memories if m.id not in known_memories]
    if new_memories:
        texts, write = [m.text for m in new_memories], functools.partial(rt.semantic.store_batch, [], new_memories)
        rt.semantic.embed_then_write("memory", [(user_id, m.id) for m in new_memories], texts, write)
    stored = report.episode_ids if report else []
    skipped = report.skipped if report else []
    # a session the save heuristics judged not worth an episode is as final as one stored; a forget or an opt-out is not
    final_skips = {session_episode_id(user_id, s["sessionId"]) for s in skipped if s["reason"] not in NOT_FINAL}
    if not opted_out:  # an opted-out user gets no digests either (an import after opting in takes every session)
        rt.episodes.record_imports(
            user_id,
            {i: digests[i] for i in stored if i in digests},
            {i: digests[i] for i in final_skips if i in digests},
        )
    return {
        "sessions": len(items),
        "episodesAdded": len([i for i in stored if i not in existing]),
        "episodesUpdated": len([i for i in stored if i in existing]),
        "unchanged": len(unchanged),
        "skipped": skipped,
        "memoriesAdded": len(new_memories),
        "memoriesUnchanged": len(memories) - len(new_memories),
        "warnings": found.warnings,
    }
