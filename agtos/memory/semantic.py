"""Semantic tier: episodes, memories (and later conclusions) indexed for hybrid recall.

Each namespace is a :class:`SemanticStore` (record JSON + Redis BM25 + vector index). The
embedder is created on first use; if it cannot be loaded the tier degrades to BM25 only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from agtos.providers.embeddings import Embedder, EmbeddingError
from agtos.schemas import Episode, Memory, MemoryChange
from agtos.schemas.records import ChangeAction, ChangeOrigin
from agtos.storage.bm25_index import BM25Index
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys
from agtos.storage.memory_history import MemoryHistory
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import SearchMode, SearchResult, SemanticStore
from agtos.storage.turns import TURN_NAMESPACE, TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.ranking import fuse_expansions
from agtos.tasks.text import episode_text
from agtos.tasks.validity import claims_of, ended_values, slot_keys, supersedes

log = logging.getLogger(__name__)

NAMESPACES = ("episode", "memory", "conclusion")
_OVERLAP_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="search-overlap")
EMBEDDER_RETRY_S = 30.0
#: (vector, keyword) weights of the turn index's RRF
TURN_RRF_WEIGHTS = (1.0, 1.0)  # after a failed load/probe, wait this long before trying again


@dataclass(frozen=True)
class SemanticSearch:
    """Search results plus how they were found (mode actually used after any fallback)."""

    results: list[SearchResult]
    mode: str
    degraded: str | None = None
    max_score: float | None = None  # the best possible hybrid score, to scale scores into 0-1


class SemanticMemory:
    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        episodes: EpisodeStore,
        embedder_factory: Callable[[], Embedder],
        default_mode: str = "hybrid",
        similarity_threshold: float = 0.15,
        hnsw_build_threads: int = 1,
        hnsw_ef_search: int = 256,
        expander: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.connector = connector
        self.keys = keys
        self.episodes = episodes
        self.default_mode = default_mode
        self.similarity_threshold = similarity_threshold
        self.hnsw_build_threads = hnsw_build_threads
        self.hnsw_ef_search = hnsw_ef_search
        self.expander = expander
        self._embedder_factory = embedder_factory
        self._embedder: Embedder | None = None
        self.embedder_error: str | None = None
        self._retry_at = 0.0
        self._stores: dict[str, SemanticStore] = {}
        self._lock = threading.Lock()
        self.history = MemoryHistory(connector, keys)  # memories' changes, timeline and slot index

    # -- components -------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The embedder, created once; raises EmbeddingError if it cannot be had."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    if time.monotonic() < self._retry_at:
                        raise EmbeddingError(f"embedder unavailable: {self.embedder_error}")
                    try:
                        candidate = self._embedder_factory()
                        _ = candidate.dim  # loads the model / probes the service
                        self._embedder, self.embedder_error = candidate, None
                    except (EmbeddingError, ValueError, OSError) as exc:
                        self.embedder_error = str(exc)
                        self._retry_at = time.monotonic() + EMBEDDER_RETRY_S
                        raise EmbeddingError(f"embedder unavailable: {exc}") from exc
        return self._embedder

    def embedder_available(self) -> bool:
        try:
            self.embedder  # noqa: B018 - property access loads it
        except EmbeddingError:
            return False
        return True

    def embed_or_none(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for ``texts``, or None when there are none or the embedder is unavailable
        (callers then index text only)."""
        if not texts:
            return None
        try:
            return self.embedder.embed(texts)
        except EmbeddingError:
            return None

    def store(self, namespace: str) -> SemanticStore:
        """The namespace's store (vector index sized to the embedder, 384 if it is unavailable)."""
        if namespace not in self._stores:
            dim = self.embedder.dim if self.embedder_available() else 384
            with self._lock:
                if namespace not in self._stores:
                    vectors = VectorIndex(
                        self.connector,
                        self.keys,
                        namespace,
                        dim,
                        expansion_search=self.hnsw_ef_search,
                        build_threads=self.hnsw_build_threads,
                        storage_dtype="f2" if namespace == TURN_NAMESPACE else "f4",  # benchmarks/turn_storage.py
                    )
                    bm25 = BM25Index(self.connector, self.keys, namespace)
                    self._stores[namespace] = (
                        TurnStore(
                            self.connector,
                            self.keys,
                            vectors,
                            bm25,
                            self.episodes.ttl_seconds,
                            rrf_weights=TURN_RRF_WEIGHTS,
                        )
                        if namespace == TURN_NAMESPACE
                        else SemanticStore(self.connector, self.keys, namespace, vectors, bm25)
                    )
        return self._stores[namespace]

    @property
    def turns(self) -> TurnStore:
        """The verbatim turns of episodes and their index (the ``turn`` namespace, episode TTL)."""
        store = self.store(TURN_NAMESPACE)
        assert isinstance(store, TurnStore)
        return store

    # -- writes -----------------------------------------------------------------------
    def store_batch(
        self,
        episodes: list[Episode],
        memories: list[Memory],
        vectors: np.ndarray | None,
    ) -> int:
        """Save episodes (TTL) and upsert memories (no TTL) with their index entries.

        ``vectors`` holds the episode rows first, then the memory rows; ``None`` means
        the embedder was unavailable and only the BM25 index is written.
        """
        episode_store = self.store("episode")
        for episode in episodes:
            self.episodes.save(episode)
        episode_vectors = None if vectors is None else vectors[: len(episodes)]
        for user_id, rows in _rows_by_user([e.user_id for e in episodes]).items():
            episode_store.index_many(
                user_id,
                [episodes[i].id for i in rows],
                [episode_text(episodes[i]) for i in rows],
                None if episode_vectors is None else episode_vectors[rows],
            )
        return self.write_memories(memories, None if vectors is None else vectors[len(episodes) :])

    def write_memories(
        self, memories: list[Memory], vectors: np.ndarray | None, origin: ChangeOrigin = "extracted"
    ) -> int:
        """Upsert memories (no TTL) with their index entries, each merged with the stored memory of
        its id; a fact a later one supersedes is closed (``valid_until``, ``superseded_by``), never
        deleted; every change goes to the memory's history. Returns the memories written."""
        memory_store = self.store("memory")
        merged, changes = self._merge_existing(memory_store, memories, origin)
        for user_id, rows in _rows_by_user([m.user_id for m in merged]).items():
            batch = [merged[i] for i in rows]
            batch, closed, superseded = self._supersede(memory_store, user_id, batch)
            memory_store.upsert_many(
                user_id,
                [(m.id, m.text, m.model_dump_json()) for m in batch],
                None if vectors is None else vectors[rows],
            )
            memory_store.put_records(user_id, {m.id: m.model_dump_json() for m in closed})
            self.history.append(user_id, [c for c in changes if c.memory_id in {m.id for m in batch}] + superseded)
            self.history.set_times(user_id, {m.id: m.valid_from for m in batch})
            self.history.add_slots(user_id, {m.id: slot_keys(claims_of(m.text)) for m in batch})
        return len(merged)

    def _merge_existing(
        self, store: SemanticStore, memories: list[Memory], origin: ChangeOrigin
    ) -> tuple[list[Memory], list[MemoryChange]]:
        """Keep first-seen time, validity and the union of the source episodes of memories already
        stored; a closed memory stated again later is current again. With the history's entries."""
        merged: list[Memory] = []
        changes: list[MemoryChange] = []
        by_user: dict[str, list[Memory]] = {}
        for memory in memories:
            by_user.setdefault(memory.user_id, []).append(memory)
        for user_id, items in by_user.items():
            existing = store.get_many(user_id, [m.id for m in items])
            for memory in items:
                source = memory.source_episode_ids[0] if memory.source_episode_ids else None
                if memory.id not in existing:
                    changes.append(_change(memory, origin, "created", source_episode_id=source))
                    merged.append(memory)
                    continue
                old = Memory.model_validate_json(existing[memory.id])
                sources = list(dict.fromkeys(old.source_episode_ids + memory.source_episode_ids))
                update: dict[str, object] = {
                    "source_episode_ids": sources,
                    "created_at": old.created_at,
                    "importance": max(old.importance, memory.importance),
                    "valid_from": min(old.valid_from, memory.valid_from),
                    "valid_until": old.valid_until,
                    "superseded_by": old.superseded_by,
                }
                reopened = old.valid_until is not None and memory.valid_from >= old.valid_until
                if reopened:
                    update |= {"valid_from": memory.valid_from, "valid_until": None, "superseded_by": None}
                memory = memory.model_copy(update=update)
                if reopened or len(sources) > len(old.source_episode_ids):
                    action: ChangeAction = "reopened" if reopened else "restated"
                    changes.append(_change(memory, origin, action, source_episode_id=source))
                merged.append(memory)
        return merged, changes

    def _supersede(
        self, store: SemanticStore, user_id: str, batch: list[Memory]
    ) -> tuple[list[Memory], list[Memory], list[MemoryChange]]:
        """Close the facts that a later fact of the same subject and attribute ends (stored ones
        and the batch's own, in the order they became true). Returns the batch, the stored
        memories closed, and the history entries of both sides."""
        claims = {m.id: claims_of(m.text) for m in batch}
        wanted = self.history.slot_ids(user_id, [k for c in claims.values() for k in slot_keys(c)])
        for value in {v for c in claims.values() for v in ended_values(c)}:
            wanted += [d for d, _ in store.keyword_candidates(user_id, value, 5)]
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
                    update={"valid_until": later.valid_from, "superseded_by": later.id}
                )
                closed.add(earlier.id)
                changes.append(_change(pool[earlier.id], "supersession", "superseded", related_id=later.id))
                changes.append(_change(later, "supersession", "supersedes", related_id=earlier.id))
        return [pool[m.id] for m in batch], [pool[i] for i in closed if i not in ids], changes

    def replace_memory(
        self, old: Memory, new: Memory, vector: np.ndarray | None, origin: ChangeOrigin = "user"
    ) -> Memory:
        """An edit: ``new`` (same id) replaces ``old`` in the record, every index, the slot index and
        the timeline; the edit is in the history, and a fact it now supersedes is closed."""
        store = self.store("memory")
        self.history.remove(old.user_id, old.id, slot_keys(claims_of(old.text)))
        (new,), closed, superseded = self._supersede(store, new.user_id, [new])
        store.upsert(new.user_id, new.id, new.text, vector, new.model_dump_json())
        store.put_records(new.user_id, {m.id: m.model_dump_json() for m in closed})
        self.history.append(new.user_id, [_change(new, origin, "edited"), *superseded])
        self.history.set_times(new.user_id, {new.id: new.valid_from})
        self.history.add_slots(new.user_id, {new.id: slot_keys(claims_of(new.text))})
        return new

    def delete_memory(self, user_id: str, memory_id: str, origin: ChangeOrigin = "user") -> bool:
        """Remove a memory and its history from Redis and every index; the facts it had superseded
        are current again (their histories say so)."""
        store = self.store("memory")
        raw = store.get_many(user_id, [memory_id]).get(memory_id)
        if not store.delete(user_id, memory_id):
            return False
        slots = slot_keys(claims_of(Memory.model_validate_json(raw).text)) if raw else []
        self.history.remove(user_id, memory_id, slots)
        replaced = [c.related_id for c in self.history.history(user_id, memory_id) if c.action == "supersedes"]
        found = store.get_many(user_id, [i for i in dict.fromkeys(replaced) if i])
        reopened = [
            m.model_copy(update={"valid_until": None, "superseded_by": None})
            for m in map(Memory.model_validate_json, found.values())
            if m.superseded_by == memory_id
        ]
        store.put_records(user_id, {m.id: m.model_dump_json() for m in reopened})
        self.history.append(user_id, [_change(m, origin, "reopened", related_id=memory_id) for m in reopened])
        self.history.forget(user_id, memory_id)
        return True

    def merge_duplicate(self, survivor: Memory, duplicate: Memory, origin: ChangeOrigin = "lint") -> Memory:
        """Fold ``duplicate`` into ``survivor`` (same user, near-identical words): the survivor keeps
        its text and id and gains the duplicate's source episodes; the duplicate leaves every index;
        facts it had superseded are superseded by the survivor. Both histories record the merge
        (the duplicate's keeps only that entry, without words)."""
        user_id = survivor.user_id
        store = self.store("memory")
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
                _change(merged, origin, "merged", related_id=duplicate.id),
                MemoryChange(memory_id=duplicate.id, origin=origin, action="merged", related_id=merged.id),
            ],
        )
        return merged

    def delete(self, namespace: str, user_id: str, doc_id: str) -> bool:
        if namespace == "memory":
            return self.delete_memory(user_id, doc_id)
        had_turns = False
        if namespace == "episode":
            self.episodes.delete(user_id, doc_id)
            had_turns = self.turns.delete_episode(user_id, doc_id) > 0
        return self.store(namespace).delete(user_id, doc_id) or had_turns

    # -- reads ------------------------------------------------------------------------
    def search(
        self,
        namespace: str,
        user_id: str,
        query: str,
        limit: int,
        mode: str | None = None,
        min_similarity: float | None = None,
    ) -> SemanticSearch:
        """Hybrid/vector/BM25 search; without an embedder, vector and hybrid fall back to BM25.

        With an expander (query expansion on), each rephrasing is searched too and the lists
        are fused by RRF, the original query weighted double.
        """
        return self.search_many(user_id, query, {namespace: limit}, mode, min_similarity)[namespace]

    def search_many(
        self,
        user_id: str,
        query: str,
        limits: Mapping[str, int],
        mode: str | None = None,
        min_similarity: float | None = None,
    ) -> dict[str, SemanticSearch]:
        """:meth:`search` in several namespaces (``limits``: namespace -> results) with one
        embedding of the query (and of its rephrasings)."""
        wanted: SearchMode = mode or self.default_mode  # type: ignore[assignment]
        threshold = self.similarity_threshold if min_similarity is None else min_similarity
        queries = [query, *(self.expander(query) if self.expander else [])]
        stores = {namespace: self.store(namespace) for namespace in limits}
        # while the query is embedded (ONNX releases the GIL), worker threads run BM25 (hybrid) and
        # the vector mirrors' Redis version checks (vector, hybrid)
        keyword = {
            ns: _OVERLAP_POOL.submit(store.keyword_candidates, user_id, query, limits[ns])
            for ns, store in stores.items()
            if wanted == "hybrid"
        }
        shards = {
            ns: _OVERLAP_POOL.submit(store.vectors.prepare, user_id) for ns, store in stores.items() if wanted != "bm25"
        }
        vectors: list[np.ndarray | None] = [None] * len(queries)
        degraded = None
        if wanted != "bm25":
            try:
                vectors = list(self.embedder.embed(queries)) if len(queries) > 1 else [self.embedder.embed_one(query)]
            except EmbeddingError as exc:
                degraded = f"embedder unavailable, keyword search only: {exc}"
                wanted = "bm25"
        out: dict[str, SemanticSearch] = {}
        for ns, store in stores.items():
            first = keyword[ns].result() if ns in keyword else None
            prepared = shards[ns].result() if ns in shards and wanted != "bm25" else None
            lists = [
                store.search(user_id, q, v, wanted, limits[ns], threshold, first if i == 0 else None, prepared)
                for i, (q, v) in enumerate(zip(queries, vectors, strict=True))
            ]
            out[ns] = SemanticSearch(fuse_expansions(lists, limits[ns]), wanted, degraded, store.max_fused_score)
        return out

    def records(self, namespace: str, user_id: str, ids: list[str]) -> dict[str, str]:
        return self.store(namespace).get_many(user_id, ids)


def _change(memory: Memory, origin: ChangeOrigin, action: ChangeAction, **extra: str | None) -> MemoryChange:
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


def _rows_by_user(user_ids: list[str]) -> dict[str, list[int]]:
    """Row numbers grouped by user, in order (batches may mix users)."""
    rows: dict[str, list[int]] = {}
    for row, user_id in enumerate(user_ids):
        rows.setdefault(user_id, []).append(row)
    return rows
