"""Semantic tier: episodes, memories (and later conclusions) indexed for hybrid recall.

Each namespace is a :class:`SemanticStore` (record JSON + Redis BM25 + vector index). The
embedder is created on first use; if it cannot be loaded the tier degrades to BM25 only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from agtos.memory.memory_versions import WRITERS, MemoryVersions, rows_by_user
from agtos.providers.embeddings import Embedder, EmbeddingError
from agtos.providers.http_embedders import HTTPEmbedder
from agtos.schemas import Episode, Memory
from agtos.schemas.records import ChangeOrigin, now_ms
from agtos.storage.bm25_index import BM25Index
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys
from agtos.storage.memory_history import MemoryHistory
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import (
    LiveRead,
    SearchMode,
    SearchResult,
    SemanticStore,
    SyncedMirrors,
    live_and_linked,
    ranked_ids,
    sync_with_reads,
)
from agtos.storage.turns import TURN_NAMESPACE, TurnStore, parse_turn_doc_id
from agtos.storage.user_lock import UserLock
from agtos.storage.vector_index import VectorIndex
from agtos.storage.vector_spaces import embedder_identity, stale_reads, waits
from agtos.tasks.ranking import fuse_expansions
from agtos.tasks.text import episode_text

log = logging.getLogger(__name__)

NAMESPACES = ("episode", "memory", "conclusion")
EMBEDDER_RETRY_S = 30.0  # after a failed load/probe, wait this long before trying again
#: (vector, keyword) weights of the turn index's RRF: a short turn that shares one word with the
#: question ("Send me the name!") ranks high in BM25; the meaning counts more (issue 14, api_eval)
TURN_RRF_WEIGHTS = (1.0, 0.5)
#: query embeddings run here beside the keyword searches of the same search (a few at a time)
_EMBEDDINGS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agtos-query-embed")
_Written = TypeVar("_Written")


@dataclass(frozen=True)
class Prepared:
    """A search's mirrors brought up to date (:meth:`SemanticMemory.prepare`) and the replies of the
    other reads done in the same round trip."""

    mode: str
    synced: dict[str, SyncedMirrors]
    replies: list[Any]
    stale: bool = False  # a vector index searched holds another embedder's vectors or waits for `agtos reindex`


@dataclass(frozen=True)
class PendingEmbedding:
    """The vectors of ``queries``, being computed (:meth:`SemanticMemory.embed_soon`)."""

    queries: tuple[str, ...]
    vectors: Future[list[np.ndarray | None]]


@dataclass(frozen=True)
class SemanticSearch:
    """Search results plus how they were found (mode actually used after any fallback)."""

    results: list[SearchResult]
    mode: str
    degraded: str | None = None
    max_score: float | None = None  # the best possible hybrid score, to scale scores into 0-1
    #: records read along with the hits that are not hits themselves (``search_many(turn_episodes=True)``:
    #: the episode records of the turn hits' episodes, id -> JSON)
    related: dict[str, str] = field(default_factory=dict)
    #: ``search_many(prefetch=...)``: the memory records asked for and those that superseded them (id -> JSON)
    memories: dict[str, str] = field(default_factory=dict)
    #: a vector search of an index that waits for ``agtos reindex`` (its records keyword-only meanwhile; an
    #: embedder failure, the search then keyword-only, is ``degraded``)
    stale: bool = False


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
        self.versions = MemoryVersions(lambda: self.store("memory"), self.history, UserLock(connector, keys, WRITERS))

    # -- components -------------------------------------------------------------------
    def release_embedder(self) -> None:
        """Close the embedder if one was built (its model is loaded again on a later use); builds none."""
        release = getattr(self._embedder, "close", None)
        if callable(release):
            release()

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

    def embedder_identity(self) -> str | None:
        """``provider:model`` of the embedder (the space of the vectors it makes), None while unavailable."""
        return embedder_identity(self.embedder) if self.embedder_available() else None

    def embedder_available(self) -> bool:
        try:
            self.embedder  # noqa: B018 - property access loads it
        except EmbeddingError:
            return False
        return True

    def embed_or_none(self, texts: list[str], wait_s: float | None = None) -> np.ndarray | None:
        """Vectors for ``texts``, or None when there are none or the embedder is unavailable
        (callers then index text only). ``wait_s``: the longest a remote embedder is waited on
        (:meth:`embed_within`), for a request being served; without it, its call timeout."""
        if not texts:
            return None
        try:
            return self.embedder.embed(texts) if wait_s is None else self.embed_within(texts, wait_s)
        except EmbeddingError:
            return None

    def embed_within(self, texts: list[str], wait_s: float) -> np.ndarray:
        """``texts``' vectors for a request being served: a remote embedder is waited on at most
        ``wait_s`` (then ``EmbeddingTimeout``, a circuit-breaker failure), not its batch timeout; the
        bundled model has no service to wait on."""
        embedder = self.embedder
        if isinstance(embedder, HTTPEmbedder):
            return embedder.embed(texts, timeout_s=wait_s)
        return embedder.embed(texts)

    def embed_then_write(
        self,
        namespace: str,
        records: Sequence[tuple[str, str]],
        texts: list[str],
        write: Callable[[np.ndarray | None], _Written],
        wait_s: float | None = None,
    ) -> _Written:
        """``write`` the ``(user id, record id)`` records with their ``texts``' vectors, or with None when
        the embedder is unavailable: then, once written, they wait for vectors (:class:`PendingVectors`;
        :mod:`agtos.memory.vector_repair` fills them). ``wait_s``: a request's bound on a remote embedder."""
        vectors = self.embed_or_none(texts, wait_s)
        written = write(vectors)
        if vectors is None and texts:
            PendingVectors(self.connector, self.keys).add_of_users(namespace, records, now_ms(), stored=True)
        return written

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
                        identity=self.embedder_identity,
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
        saved: bool = False,
    ) -> int:
        """Save episodes (TTL) and upsert memories (no TTL) with their index entries.

        ``vectors`` holds the episode rows first, then the memory rows; ``None`` means
        the embedder was unavailable and only the BM25 index is written. ``saved``: the
        episodes' records are written already (only their index entries are).
        """
        episode_store = self.store("episode")
        for episode in [] if saved else episodes:
            self.episodes.save(episode)
        episode_vectors = None if vectors is None else vectors[: len(episodes)]
        for user_id, rows in rows_by_user([e.user_id for e in episodes]).items():
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
        """Upsert memories with their versions (:meth:`MemoryVersions.write`); returns the memories written."""
        return self.versions.write(memories, vectors, origin)

    def replace_memory(
        self, old: Memory, new: Memory, vector: np.ndarray | None, origin: ChangeOrigin = "user"
    ) -> Memory | None:
        """An edit (:meth:`MemoryVersions.replace`); None when the memory is no longer stored."""
        return self.versions.replace(old, new, vector, origin)

    def delete_memory(self, user_id: str, memory_id: str, origin: ChangeOrigin = "user") -> bool:
        """Remove a memory and its history (:meth:`MemoryVersions.delete`)."""
        return self.versions.delete(user_id, memory_id, origin)

    def merge_duplicate(self, survivor: Memory, duplicate: Memory, origin: ChangeOrigin = "lint") -> Memory | None:
        """Fold ``duplicate`` into ``survivor``, unless either changed since it was read
        (:meth:`MemoryVersions.merge_duplicate`)."""
        return self.versions.merge_duplicate(survivor, duplicate, origin)

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
        neighbours: int = 0,
        turn_episodes: bool = False,
        prepared: Prepared | None = None,
        embedding: PendingEmbedding | None = None,
        prefetch: Callable[[list[str]], list[str]] | None = None,
    ) -> dict[str, SemanticSearch]:
        """:meth:`search` in several namespaces (``limits``: namespace -> results) with one
        embedding of the query (and of its rephrasings), their records read in one round trip:
        turn hits with ``neighbours`` turns either side (``SearchResult.window``, for
        :meth:`TurnStore.lookup`), and with ``turn_episodes`` the episode records of the turn hits'
        episodes that are not episode hits (``related`` of the ``episode`` result). ``prepared``: the
        mirrors already synced by :meth:`prepare` for these namespaces and mode; ``embedding``: from
        :meth:`embed_soon`, used if it embeds these very queries (else they are embedded now);
        ``prefetch`` (with ``turn_episodes``): given the ids of the episodes whose records are read,
        the ids of memories to read in the same round trip with the memories that superseded them
        (``memories`` of the ``episode`` result)."""
        wanted: SearchMode = mode or self.default_mode  # type: ignore[assignment]
        threshold = self.similarity_threshold if min_similarity is None else min_similarity
        queries = [query, *(self.expander(query) if self.expander else [])]
        stores = {namespace: self.store(namespace) for namespace in limits}
        if prepared is None or prepared.mode != wanted or set(prepared.synced) != set(stores):
            prepared = self.prepare(user_id, list(limits), wanted)
        synced = prepared.synced
        vectors: list[np.ndarray | None] = [None] * len(queries)
        degraded = None
        # the query is embedded in another thread (onnxruntime releases the GIL) while this one runs
        # the keyword searches, which do not need its vector
        pending = None
        if wanted != "bm25" and embedding is not None and embedding.queries == tuple(queries):
            pending = embedding.vectors
        elif wanted != "bm25":
            pending = _EMBEDDINGS.submit(self._embed_queries, queries)
        keyword = [
            None if wanted == "vector" else store.keyword_candidates(user_id, q, limits[ns], synced[ns].bm25)
            for ns, store in stores.items()
            for q in queries
        ]
        if pending is not None:
            try:
                vectors = pending.result()
            except EmbeddingError as exc:
                degraded = f"embedder unavailable, keyword search only: {exc}"
                wanted = "bm25"
        pairs = [(ns, store, q, v) for ns, store in stores.items() for q, v in zip(queries, vectors, strict=True)]
        reads = [
            LiveRead(
                store,
                store.rank(user_id, q, v, wanted, limits[ns], threshold, hits, synced[ns]),
                limits[ns],
                neighbours if ns == TURN_NAMESPACE else 0,
            )
            for (ns, store, q, v), hits in zip(pairs, keyword, strict=True)
        ]
        also = linked = None
        if turn_episodes and TURN_NAMESPACE in stores and "episode" in stores:
            pages = {r.store.namespace: ranked_ids(r.ranked, r.limit) for r in reads}
            listed = set(pages["episode"])
            places = (parse_turn_doc_id(d) for d in pages[TURN_NAMESPACE])
            also = (stores["episode"], list(dict.fromkeys(p[0] for p in places if p and p[0] not in listed)))
            if prefetch is not None:
                wanted_memories = list(dict.fromkeys(prefetch([*pages["episode"], *also[1]])))
                linked = (self.store("memory"), wanted_memories, "superseded_by")
        lives, related, memories = live_and_linked(user_id, reads, also, linked)
        found = iter(lives)
        out: dict[str, SemanticSearch] = {}
        for ns, store in stores.items():
            lists = [next(found) for _ in queries]
            out[ns] = SemanticSearch(
                fuse_expansions(lists, limits[ns]),
                wanted,
                degraded,
                store.max_fused_score,
                related if ns == "episode" else {},
                memories if ns == "episode" else {},
                stale=prepared.stale,
            )
        return out

    def embed_soon(self, query: str, mode: str | None = None) -> PendingEmbedding | None:
        """Start embedding ``query`` for a :meth:`search_many` in ``mode`` about to run (its other
        reads go on meanwhile); None when that search embeds nothing or expands the query."""
        if (mode or self.default_mode) == "bm25" or self.expander is not None:
            return None
        return PendingEmbedding((query,), _EMBEDDINGS.submit(self._embed_queries, [query]))

    def _embed_queries(self, queries: list[str]) -> list[np.ndarray | None]:
        """The vector of each query (one cached single-text call for one query)."""
        if len(queries) > 1:
            embedder = self.embedder
            if isinstance(embedder, HTTPEmbedder):  # a query and its rephrasings wait as long as one query
                return list(embedder.embed(queries, timeout_s=embedder.query_timeout_s))
            return list(embedder.embed(queries))
        return [self.embedder.embed_one(queries[0])]

    def prepare(
        self,
        user_id: str,
        namespaces: Sequence[str],
        mode: str | None = None,
        reads: Sequence[Callable[[Any], Any]] = (),
    ) -> Prepared:
        """Bring every mirror a search of ``namespaces`` in ``mode`` reads up to date, their version
        checks and ``reads`` (each queues one command of this user's keys on a pipeline) in one round trip."""
        wanted: SearchMode = mode or self.default_mode  # type: ignore[assignment]
        stores = [self.store(namespace) for namespace in namespaces]
        # with them, each searched vector index's space and reindex note (the search says when records wait)
        spaces = [] if wanted == "bm25" else [r for ns in namespaces for r in stale_reads(self.keys, user_id, ns)]
        synced, replies = sync_with_reads(user_id, stores, wanted, [*reads, *spaces])
        own, replies = replies[len(reads) :], replies[: len(reads)]
        stale = any(
            waits(own[2 * k : 2 * k + 2], store.vectors.space, store.vectors.legacy_space)
            for k, store in enumerate(stores if spaces else [])
        )
        return Prepared(wanted, dict(zip(namespaces, synced, strict=True)), replies, stale)

    def records(self, namespace: str, user_id: str, ids: list[str]) -> dict[str, str]:
        return self.store(namespace).get_many(user_id, ids)
