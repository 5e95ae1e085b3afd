"""Memories with their versions: every write of the ``memory`` namespace merges with what is stored,
closes the facts a later one supersedes (``valid_until``, ``superseded_by``; never deleted) and
records each change in the memory's history (:class:`~agtos.storage.memory_history.MemoryHistory`).

Each write reads the stored memories it changes (to merge sources, close facts, fold duplicates) and
writes them back, and so do an edit, a delete, an episode's forget and the lint's merge; an API
process and a queue worker may do two of these for one user at once. Every such read-to-write holds
the user's :data:`WRITERS` lock named :data:`MEMORIES` (a :class:`UserLock`, across processes), so none
writes over what another wrote in between. No holder calls another (the lock is not re-entrant), and
the embedder is called outside it (callers pass the vectors).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby

import numpy as np

from agtos.schemas import Memory, MemoryChange
from agtos.schemas.records import ChangeAction, ChangeOrigin
from agtos.storage.memory_history import MemoryHistory
from agtos.storage.semantic_store import SemanticStore
from agtos.storage.user_lock import UserLock
from agtos.tasks.validity import claims_of, ended_values, slot_keys, superseded_slot_keys, supersedes

#: The most stored memories naming one value that a fact ending it judges: every one up to it (the documents
#: of the value's BM25 postings, best first), so an earlier fact of no known shape, found by no slot, is closed
#: however many other memories name the value; it bounds one write's record reads.
ENDED_VALUE_MATCHES = 10_000
#: the kind and name of the per-user lock of memory writers (key ``<prefix>:u:{<user>}:writers:memories``)
WRITERS = "writers"
MEMORIES = "memories"


class MemoryVersions:
    """Writes, edits, deletes and merges of memories over the memory store and its history."""

    def __init__(self, store: Callable[[], SemanticStore], history: MemoryHistory, lock: UserLock) -> None:
        self.store = store  # the memory namespace's store (created on first use)
        self.history = history
        self.lock = lock  # of kind WRITERS, held under the name MEMORIES

    def write(self, memories: list[Memory], vectors: np.ndarray | None, origin: ChangeOrigin = "extracted") -> int:
        """Upsert memories (no TTL) with their index entries, each merged with the stored memory of
        its id; a fact a later one supersedes is closed (``valid_until``, ``superseded_by``), never
        deleted; every change goes to the memory's history. A memory said again by a later source
        of the batch (a fact of several sessions of one ingestion run) is written in rounds
        (:func:`statement_rounds`), as separate batches would write it. Returns the memories written."""
        rounds = statement_rounds(memories)
        if len(rounds) <= 1:
            return self._write(memories, vectors, origin)
        for rows in rounds:
            self._write([memories[i] for i in rows], None if vectors is None else vectors[rows], origin)
        return len({(m.user_id, m.id) for m in memories})

    def _write(self, memories: list[Memory], vectors: np.ndarray | None, origin: ChangeOrigin) -> int:
        """Each user's memories merged, closed and written under that user's lock."""
        memory_store = self.store()
        for user_id, rows in rows_by_user([m.user_id for m in memories]).items():
            with self.lock.held(user_id, MEMORIES):
                batch = [memories[i] for i in rows]
                self._write_user(memory_store, user_id, batch, None if vectors is None else vectors[rows], origin)
        return len(memories)

    def _write_user(
        self,
        store: SemanticStore,
        user_id: str,
        memories: list[Memory],
        vectors: np.ndarray | None,
        origin: ChangeOrigin,
    ) -> None:
        """One user's memories merged with the stored ones, the facts they end closed, all written."""
        merged, changes = self._merge_existing(store, user_id, memories, origin)
        batch, closed, superseded = self._supersede(store, user_id, merged)
        store.upsert_many(user_id, [(m.id, m.text, m.model_dump_json()) for m in batch], vectors)
        store.put_records(user_id, {m.id: m.model_dump_json() for m in closed})
        self.history.append(user_id, changes + superseded)
        self.history.set_times(user_id, {m.id: m.valid_from for m in batch})
        self.history.add_slots(user_id, {m.id: slot_keys(claims_of(m.text)) for m in batch})

    def _merge_existing(
        self, store: SemanticStore, user_id: str, memories: list[Memory], origin: ChangeOrigin
    ) -> tuple[list[Memory], list[MemoryChange]]:
        """Keep first-seen time, validity and the union of the source episodes of memories already
        stored; a closed memory stated again later is current again. With the history's entries."""
        merged: list[Memory] = []
        changes: list[MemoryChange] = []
        existing = store.get_many(user_id, [m.id for m in memories])
        for memory in memories:
            source = memory.source_episode_ids[0] if memory.source_episode_ids else None
            if memory.id not in existing:
                changes.append(change(memory, origin, "created", source_episode_id=source))
                merged.append(memory)
                continue
            old = Memory.model_validate_json(existing[memory.id])
            sources = list(dict.fromkeys(old.source_episode_ids + memory.source_episode_ids))
            update: dict[str, object] = {
                "source_episode_ids": sources,
                "created_at": old.created_at,
                "importance": max(old.importance, memory.importance),
                "valid_from": min(old.valid_from, memory.valid_from),
                "utc_offset": old.utc_offset if old.valid_from <= memory.valid_from else memory.utc_offset,
                "valid_until": old.valid_until,
                "until_utc_offset": old.until_utc_offset,
                "superseded_by": old.superseded_by,
            }
            reopened = old.valid_until is not None and memory.valid_from >= old.valid_until
            if reopened:
                update |= {"valid_from": memory.valid_from, "utc_offset": memory.utc_offset}
                update |= {"valid_until": None, "until_utc_offset": None, "superseded_by": None}
            memory = memory.model_copy(update=update)
            if reopened or len(sources) > len(old.source_episode_ids):
                action: ChangeAction = "reopened" if reopened else "restated"
                changes.append(change(memory, origin, action, source_episode_id=source))
            merged.append(memory)
        return merged, changes

    def _supersede(
        self, store: SemanticStore, user_id: str, batch: list[Memory]
    ) -> tuple[list[Memory], list[Memory], list[MemoryChange]]:
        """Close the facts that a later fact of the same subject and attribute ends (stored ones
        and the batch's own, in the order they became true). Returns the batch, the stored
        memories closed, and the history entries of both sides."""
        claims = {m.id: claims_of(m.text) for m in batch}
        wanted = self.history.slot_ids(user_id, [k for c in claims.values() for k in superseded_slot_keys(c)])
        for value in {v for c in claims.values() for v in ended_values(c)}:
            wanted += [d for d, _ in store.bm25.search(user_id, value, ENDED_VALUE_MATCHES)]
        ids = {m.id for m in batch}
        stored = store.get_many(user_id, [i for i in dict.fromkeys(wanted) if i not in ids]) if wanted else {}
        pool = {i: Memory.model_validate_json(raw) for i, raw in stored.items()} | {m.id: m for m in batch}
        claims |= {i: claims_of(m.text) for i, m in pool.items() if i not in claims}
        changes: list[MemoryChange] = []
        closed: set[str] = set()
        position = {m.id: n for n, m in enumerate(batch)}  # equal times: the later statement in the batch

        def order(memory_id: str) -> tuple[int, int]:
            return pool[memory_id].valid_from, position.get(memory_id, -1)

        for new_id in sorted(ids, key=order):
            for old_id in sorted(pool, key=order):
                new, old = pool[new_id], pool[old_id]
                if old_id == new_id or not old.current or not new.current:
                    continue
                if order(old_id) < order(new_id) and supersedes(claims[new_id], old.text, claims[old_id]):
                    later, earlier = new, old
                elif order(old_id) > order(new_id) and supersedes(claims[old_id], new.text, claims[new_id]):
                    later, earlier = old, new  # stated earlier, learned later (a back-filled log)
                else:
                    continue
                pool[earlier.id] = earlier.model_copy(
                    update={
                        "valid_until": later.valid_from,
                        "until_utc_offset": later.utc_offset,  # read on the local day the later one was said
                        "superseded_by": later.id,
                    }
                )
                closed.add(earlier.id)
                changes.append(change(pool[earlier.id], "supersession", "superseded", related_id=later.id))
                changes.append(change(later, "supersession", "supersedes", related_id=earlier.id))
        return [pool[m.id] for m in batch], [pool[i] for i in closed if i not in ids], changes

    def replace(
        self, old: Memory, new: Memory, vector: np.ndarray | None, origin: ChangeOrigin = "user"
    ) -> Memory | None:
        """An edit: ``new`` (same id) replaces ``old`` in the record, every index, the slot index and
        the timeline; the edit is in the history, and a fact it now supersedes is closed. The fields the
        edit changes (``old`` to ``new``) are applied to the memory as stored when it is written: what
        another writer changed since ``old`` was read (a session end's new source, the lint's merge) stays.
        None, and nothing written, when it is no longer stored (deleted or forgotten since ``old`` was read)."""
        store = self.store()
        with self.lock.held(new.user_id, MEMORIES):
            raw = store.get_many(new.user_id, [old.id]).get(old.id)
            if raw is None:
                return None
            stored = Memory.model_validate_json(raw)
            edited = rebased(old, new, stored)
            if edited.text != new.text:  # another edit changed the words this one keeps: their vector
                vector = store.vectors.vectors(new.user_id, [new.id]).get(new.id)
            self.history.remove(stored.user_id, stored.id, slot_keys(claims_of(stored.text)))
            (edited,), closed, superseded = self._supersede(store, edited.user_id, [edited])
            store.upsert(edited.user_id, edited.id, edited.text, vector, edited.model_dump_json())
            store.put_records(edited.user_id, {m.id: m.model_dump_json() for m in closed})
            self.history.append(edited.user_id, [change(edited, origin, "edited"), *superseded])
            self.history.set_times(edited.user_id, {edited.id: edited.valid_from})
            self.history.add_slots(edited.user_id, {edited.id: slot_keys(claims_of(edited.text))})
        return edited

    def restate(self, memory: Memory, sources: list[str], text: str) -> Memory | None:
        """``memory`` said again in other words (``text``, a POST of its near-duplicate): ``sources`` join
        its source episodes and its history records the words. None, and nothing written, when it is no
        longer stored or no longer current (forgotten or closed since the caller found it)."""
        store = self.store()
        with self.lock.held(memory.user_id, MEMORIES):
            raw = store.get_many(memory.user_id, [memory.id]).get(memory.id)
            stored = None if raw is None else Memory.model_validate_json(raw)
            if stored is None or not stored.current:
                return None
            merged = stored.model_copy(
                update={"source_episode_ids": list(dict.fromkeys(stored.source_episode_ids + sources))}
            )
            store.put_records(merged.user_id, {merged.id: merged.model_dump_json()})
            self.history.append(
                merged.user_id, [MemoryChange(memory_id=merged.id, origin="user", action="merged", text=text)]
            )
        return merged

    def delete(self, user_id: str, memory_id: str, origin: ChangeOrigin = "user") -> bool:
        """Remove a memory and its history from Redis and every index; the facts it had superseded
        are current again (their histories say so)."""
        with self.lock.held(user_id, MEMORIES):
            return self._delete(self.store(), user_id, memory_id, origin)

    def _delete(self, store: SemanticStore, user_id: str, memory_id: str, origin: ChangeOrigin) -> bool:
        """:meth:`delete`, its caller holding the lock."""
        raw = store.get_many(user_id, [memory_id]).get(memory_id)
        if not store.delete(user_id, memory_id):
            return False
        slots = slot_keys(claims_of(Memory.model_validate_json(raw).text)) if raw else []
        self.history.remove(user_id, memory_id, slots)
        replaced = [c.related_id for c in self.history.history(user_id, memory_id) if c.action == "supersedes"]
        found = store.get_many(user_id, [i for i in dict.fromkeys(replaced) if i])
        reopened = [
            m.model_copy(update={"valid_until": None, "until_utc_offset": None, "superseded_by": None})
            for m in map(Memory.model_validate_json, found.values())
            if m.superseded_by == memory_id
        ]
        store.put_records(user_id, {m.id: m.model_dump_json() for m in reopened})
        self.history.append(user_id, [change(m, origin, "reopened", related_id=memory_id) for m in reopened])
        self.history.forget(user_id, memory_id)
        return True

    def drop_episode(self, user_id: str, episode_id: str) -> int:
        """A forgotten episode: the memories it alone supports are deleted, the others no longer name it
        (memories the user wrote name no episode); returns how many were deleted."""
        store = self.store()
        with self.lock.held(user_id, MEMORIES):
            ids = sorted(set(store.bm25.ids(user_id)) | set(self.history.timeline_ids(user_id)))
            found = [Memory.model_validate_json(raw) for raw in store.get_many(user_id, ids).values()]
            sourced = [m for m in found if episode_id in m.source_episode_ids]
            kept: dict[str, str] = {}
            for memory in sourced:
                rest = [e for e in memory.source_episode_ids if e != episode_id]
                if rest:
                    kept[memory.id] = memory.model_copy(update={"source_episode_ids": rest}).model_dump_json()
                else:
                    self._delete(store, user_id, memory.id, "user")
            store.put_records(user_id, kept)
        return len(sourced) - len(kept)

    def merge_duplicate(self, survivor: Memory, duplicate: Memory, origin: ChangeOrigin = "lint") -> Memory | None:
        """Fold ``duplicate`` into ``survivor`` (same user, near-identical words): the survivor keeps
        its text and id and gains the duplicate's source episodes; the duplicate leaves every index;
        facts it had superseded are superseded by the survivor. Both histories record the merge
        (the duplicate's keeps only that entry, without words). None, and nothing done, when either is
        no longer stored as given (edited, forgotten or restated since the caller read it)."""
        user_id = survivor.user_id
        store = self.store()
        with self.lock.held(user_id, MEMORIES):
            now = store.get_many(user_id, [survivor.id, duplicate.id])
            if any(m.id not in now or Memory.model_validate_json(now[m.id]) != m for m in (survivor, duplicate)):
                return None
            return self._merge(store, survivor, duplicate, origin)

    def _merge(self, store: SemanticStore, survivor: Memory, duplicate: Memory, origin: ChangeOrigin) -> Memory:
        """:meth:`merge_duplicate`, its caller holding the lock."""
        user_id = survivor.user_id
        merged = survivor.model_copy(
            update={
                "source_episode_ids": list(dict.fromkeys(survivor.source_episode_ids + duplicate.source_episode_ids)),
                "importance": max(survivor.importance, duplicate.importance),
            }
        )
        replaced = [c.related_id for c in self.history.history(user_id, duplicate.id) if c.action == "supersedes"]
        found = store.get_many(user_id, [i for i in dict.fromkeys(replaced) if i])
        repointed = [
            m.model_copy(update={"superseded_by": merged.id})
            for m in map(Memory.model_validate_json, found.values())
            if m.superseded_by == duplicate.id
        ]
        store.put_records(user_id, {m.id: m.model_dump_json() for m in [merged, *repointed]})
        store.delete(user_id, duplicate.id)
        self.history.remove(user_id, duplicate.id, slot_keys(claims_of(duplicate.text)))
        self.history.forget(user_id, duplicate.id)
        self.history.append(
            user_id,
            [
                change(merged, origin, "merged", related_id=duplicate.id),
                MemoryChange(memory_id=duplicate.id, origin=origin, action="merged", related_id=merged.id),
            ],
        )
        return merged


def rebased(old: Memory, new: Memory, stored: Memory) -> Memory:
    """``stored`` with the fields that ``new`` changed from ``old`` set as ``new`` has them."""
    was = old.model_dump()
    return Memory.model_validate(stored.model_dump() | {k: v for k, v in new.model_dump().items() if v != was[k]})


def change(memory: Memory, origin: ChangeOrigin, action: ChangeAction, **extra: str | None) -> MemoryChange:
    """A history entry of ``memory`` as it is after the change."""
    return MemoryChange(
        memory_id=memory.id,
        origin=origin,
        action=action,
        text=memory.text,
        valid_from=memory.valid_from,
        valid_until=memory.valid_until,
        **extra,  # type: ignore[arg-type]
    )


def statement_rounds(memories: list[Memory]) -> list[list[int]]:
    """The rows of ``memories`` in rounds to write one after the other: the consecutive rows of one
    first source episode (what one session said) stay together, and a round ends before a source
    that says one of its memories again (same user and id). One round when no memory repeats."""
    rounds: list[list[int]] = []
    seen: set[tuple[str, str]] = set()
    for _, group in groupby(range(len(memories)), key=lambda row: memories[row].source_episode_ids[:1]):
        rows = list(group)
        said = {(memories[row].user_id, memories[row].id) for row in rows}
        if not rounds or not seen.isdisjoint(said):
            rounds.append([])
            seen = set()
        rounds[-1] += rows
        seen |= said
    return rounds


def rows_by_user(user_ids: list[str]) -> dict[str, list[int]]:
    """Row numbers grouped by user, in order (batches may mix users)."""
    rows: dict[str, list[int]] = {}
    for row, user_id in enumerate(user_ids):
        rows.setdefault(user_id, []).append(row)
    return rows
