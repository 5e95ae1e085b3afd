"""Memory CRUD over the semantic tier: write, list or search, read, edit and delete memories, and
read their history. Writes go through :meth:`SemanticMemory.write_memories` (every index, the
history, supersession) and feed the entity graph like ingestion does. The facade checks ids and
privacy before calling these.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agtos.memory.episode_cascade import forget_entities_of
from agtos.memory.privacy_controls import NotFoundError
from agtos.schemas import Episode, Memory, MemoryChange, MemoryKind
from agtos.schemas.records import now_ms
from agtos.tasks.distil import memory_id
from agtos.tasks.entity_records import entity_text

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)
DUPLICATE_CANDIDATES = 20  # BM25 neighbours of a new text checked for a near-duplicate


@dataclass(frozen=True)
class MemoryWrite:
    """The memory a POST left: ``merged_into`` names the stored near-duplicate it was folded into."""

    memory: Memory
    created: bool
    merged_into: str | None = None


@dataclass(frozen=True)
class MemoryPage:
    memories: list[Memory]
    total: int | None  # None for a search (ranked, not counted)


def get(rt: Services, user_id: str, mid: str) -> Memory:
    raw = rt.semantic.records("memory", user_id, [mid]).get(mid)
    if raw is None:
        raise NotFoundError(f"no memory {mid!r} for this user")
    return Memory.model_validate_json(raw)


def _near_duplicate(rt: Services, user_id: str, text: str, kind: MemoryKind) -> Memory | None:
    """A stored current memory of the same ``kind`` whose words are the new text's by the lint's rule
    (token-set Jaccard ≥ ``AGTOS_MAINTENANCE_JACCARD``), the most similar first; the same words (the
    same id) whatever its kind, as one statement is one record."""
    from agtos.tasks.pair_selection import jaccard, token_set  # DuckDB and Polars load on first use

    store = rt.semantic.store("memory")
    same = memory_id(user_id, text)
    ids = [same] + [d for d, _ in store.keyword_candidates(user_id, text, DUPLICATE_CANDIDATES)]
    found = [Memory.model_validate_json(raw) for raw in store.get_many(user_id, ids).values()]
    words = token_set(text)
    scored = [(jaccard(words, token_set(m.text)), m) for m in found if m.current and (m.kind == kind or m.id == same)]
    threshold = rt.settings.maintenance.jaccardThreshold
    best = max(scored, key=lambda pair: pair[0], default=(0.0, None))
    return best[1] if best[0] >= threshold else None


def create(
    rt: Services,
    user_id: str,
    text: str,
    kind: MemoryKind,
    source: str | None = None,
    valid_from: int | None = None,
    valid_until: int | None = None,
) -> MemoryWrite:
    """Store a memory the user or agent states directly, or fold it into its near-duplicate."""
    sources = [source] if source else []
    duplicate = _near_duplicate(rt, user_id, text, kind)
    merged = None if duplicate is None else rt.semantic.versions.restate(duplicate, sources, text)
    if merged is not None:  # else none, or it was forgotten or closed since: the words are stored anew
        return MemoryWrite(merged, False, merged.id)
    stamp = now_ms()
    memory = Memory(
        id=memory_id(user_id, text),
        user_id=user_id,
        text=text,
        kind=kind,
        source_episode_ids=sources,
        created_at=stamp,
        valid_from=valid_from or stamp,
        valid_until=valid_until,
    )
    write = functools.partial(rt.semantic.write_memories, [memory], origin="user")
    rt.semantic.embed_then_write("memory", [(user_id, memory.id)], [text], write, _request_wait(rt))
    _feed_entities(rt, memory)
    try:
        stored = get(rt, user_id, memory.id)
    except NotFoundError:  # a concurrent DELETE of its id came after the write: this create still happened
        stored = memory  # the entities fed after that DELETE go (one landing from now on finds them)
        forget_entities_of(rt, user_id, memory.id)
    return MemoryWrite(stored, True)


def update(
    rt: Services,
    user_id: str,
    mid: str,
    text: str | None = None,
    kind: MemoryKind | None = None,
    valid_from: int | None = None,
    valid_until: int | None = None,
    clear_until: bool = False,
) -> Memory:
    """Edit a memory (text, kind, validity); a new text is re-indexed and fed to the entity graph."""
    old = get(rt, user_id, mid)
    changes: dict[str, object] = {}
    if text is not None:
        changes["text"] = text
    if kind is not None:
        changes["kind"] = kind
    if valid_from is not None:  # a time sent as ms: on its UTC day, not the turn's local one
        changes |= {"valid_from": valid_from, "utc_offset": None}
    if valid_until is not None or clear_until:
        changes |= {"valid_until": valid_until, "until_utc_offset": None, "superseded_by": None}  # ms: its UTC day
    new = Memory.model_validate(old.model_dump() | changes)
    if new.text == old.text:  # the stored vector stays
        vector = rt.semantic.store("memory").vectors.vectors(user_id, [mid]).get(mid)
        return _edited(rt.semantic.replace_memory(old, new, vector), mid)
    memory = _edited(
        rt.semantic.embed_then_write(
            "memory",
            [(user_id, mid)],
            [new.text],
            lambda rows: rt.semantic.replace_memory(old, new, None if rows is None else rows[0]),
            _request_wait(rt),
        ),
        mid,
    )
    forget_entities_of(rt, user_id, mid, memory.text)  # what the old text alone named goes
    _feed_entities(rt, memory)
    return memory


def _edited(memory: Memory | None, mid: str) -> Memory:
    """The memory an edit wrote; NotFoundError when it was deleted before the edit could be written."""
    if memory is None:
        raise NotFoundError(f"no memory {mid!r} for this user")
    return memory


def history(rt: Services, user_id: str, mid: str) -> list[MemoryChange]:
    """The memory's changes, oldest first; NotFoundError when there is no trace of it."""
    changes = rt.semantic.history.history(user_id, mid)
    if not changes:
        get(rt, user_id, mid)  # a memory stored before histories existed: an empty history
    return changes


def listing(
    rt: Services,
    user_id: str,
    query: str | None,
    kind: MemoryKind | None,
    limit: int,
    offset: int,
) -> MemoryPage:
    """Newest first (by when they became true), or the best matches of ``query`` (hybrid search,
    current facts before superseded ones); ``kind`` filters either."""
    if query:
        found = rt.semantic.search("memory", user_id, query, min(200, offset + limit) * (3 if kind else 1))
        hits = [Memory.model_validate_json(r.payload) for r in found.results if r.payload is not None]
        hits = [m for m in hits if kind is None or m.kind == kind]
        hits.sort(key=lambda m: not m.current)  # stable: the search's order within each group
        return MemoryPage(hits[offset : offset + limit], None)
    history = rt.semantic.history
    _backfill_timeline(rt, user_id)
    if kind is None:
        ids, total = history.page(user_id, offset, limit)
        records = rt.semantic.records("memory", user_id, ids)
        return MemoryPage([Memory.model_validate_json(records[i]) for i in ids if i in records], total)
    ids = list(reversed(history.timeline_ids(user_id)))
    raws = rt.semantic.records("memory", user_id, ids)
    every = [m for m in (Memory.model_validate_json(raws[i]) for i in ids if i in raws) if m.kind == kind]
    return MemoryPage(every[offset : offset + limit], len(every))


def _backfill_timeline(rt: Services, user_id: str) -> None:
    """Memories stored before the timeline existed join it (once: the timeline is then not empty)."""
    if rt.semantic.history.page(user_id, 0, 1)[1]:
        return
    store = rt.semantic.store("memory")
    raws = store.get_many(user_id, store.bm25.ids(user_id))
    rt.semantic.history.set_times(user_id, {i: Memory.model_validate_json(raw).valid_from for i, raw in raws.items()})


def _request_wait(rt: Services) -> float:
    """How long a memory written over HTTP waits on a remote embedder (then it waits for its vector)."""
    return rt.settings.embedding.request_timeout_s


def _feed_entities(rt: Services, memory: Memory) -> None:
    """The entities and relationships the memory names, into the entity graph (as ingestion does)."""
    if rt.recognizer is None:
        return
    episode = Episode(
        id=memory.id,
        user_id=memory.user_id,
        summary=memory.text[:20_000],
        facts=[],
        timestamp=memory.valid_from,
    )
    try:
        rt.entities.ingest([episode], rt.recognizer.recognize_many([entity_text(episode)]), _request_wait(rt))
    except Exception:  # derived data: the memory stands without it
        log.exception("entity graph not updated for memory %s", memory.id)
