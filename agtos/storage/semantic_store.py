"""Searchable records: a JSON string per record plus its vector and BM25 index entries.

Records live at ``UserKeys.record(namespace, doc_id)`` (optionally with a TTL); the
indexes never expire on their own, so search drops hits whose record is gone and
removes them from both indexes on the spot (``prune`` sweeps the rest).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import redis
from redis.cluster import ClusterPipeline
from redis.commands.core import Script

from agtos.storage.bm25_index import BM25Index
from agtos.storage.bm25_mirror import BM25Mirror
from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.mirror_sync import SyncCheck, plan_with_reads
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector, StorageUnavailable, as_text
from agtos.storage.vector_index import VectorIndex
from agtos.storage.vector_shard import LocalShard
from agtos.tasks.ranking import DEFAULT_K, content_order, fuse_scored, max_fused_score, ties_ordered

log = logging.getLogger(__name__)

#: ``SemanticStore.get_linked``: id, JSON, id, JSON... of the records KEYS[i] (key ARGV[1] .. id) found, then
#: of the records the string field ARGV[2] of those names (record ids only, each once, not those found:
#: key ARGV[1] .. id); MGET of one key, not GET: nil for a key of another type, as ``get_many``'s MGET
_LINKED_LUA = """
local out, seen = {}, {}
local after = #ARGV[1] + 1
for _, key in ipairs(KEYS) do
  local raw = redis.call('MGET', key)[1]
  if raw then
    local id = key:sub(after)
    out[#out + 1] = id
    out[#out + 1] = raw
    seen[id] = true
  end
end
for i = 2, #out, 2 do
  local link = cjson.decode(out[i])[ARGV[2]]
  if type(link) == 'string' and #link <= 128 and link:find('^[%w_.%-]+$') and not seen[link] then
    seen[link] = true
    local raw = redis.call('MGET', ARGV[1] .. link)[1]
    if raw then
      out[#out + 1] = link
      out[#out + 1] = raw
    end
  end
end
return out
"""

#: (key prefix, namespace, user, doc id) -> the record's key (:meth:`SemanticStore._record_key`)
_RECORD_KEYS: dict[tuple[str, str, str, str], str] = {}
_KEYS_KEPT = 65_536

SearchMode = Literal["hybrid", "vector", "bm25"]
Window = tuple[int, tuple[bytes, ...]]  # how many neighbours either side were read, and the raw turns read
MatchType = Literal["semantic", "keyword", "hybrid"]


@dataclass(frozen=True)
class SearchResult:
    """One hit: ``score`` is the similarity (vector), BM25 score (bm25) or RRF score (hybrid)."""

    id: str
    score: float
    match_type: MatchType
    similarity: float | None = None
    payload: str | None = field(default=None, compare=False, repr=False)  # the record's JSON
    #: a turn hit read with its neighbours (:func:`live_many` ``window`` > 0): ``(window, raw turns
    #: of positions position - window .. position + window that exist, in order)``
    window: Window | None = field(default=None, compare=False, repr=False)


Row = tuple[str, float, MatchType, float | None]  # a SearchResult's id, score, match type and similarity


class Ranked(Sequence[SearchResult]):
    """:meth:`SemanticStore.rank`'s candidates, best first: a :class:`SearchResult` is made only for
    the candidates taken (a search reads the first page of a pool of a few hundred)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> SearchResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[SearchResult]: ...

    def __getitem__(self, index: int | slice) -> SearchResult | list[SearchResult]:
        if isinstance(index, slice):
            return [SearchResult(*row) for row in self._slice(index)]
        return SearchResult(*self._slice(slice(index, index + 1 or None))[0])

    def _slice(self, index: slice) -> list[Row]:
        """The rows of the candidates ``index`` selects."""
        return self.rows[index]

    def take(self, start: int, stop: int) -> list[Row]:
        """The rows of candidates ``start`` to ``stop`` (no :class:`SearchResult` made)."""
        return self._slice(slice(start, stop))

    def ids(self, stop: int) -> list[str]:
        """The ids of the first ``stop`` candidates."""
        return [row[0] for row in self.rows[:stop]]


class FusedRanked(Ranked):
    """:class:`Ranked` of RRF-fused candidates: each row (its match type and similarity) is made only
    when the candidate is taken."""

    __slots__ = ("fused", "keyword_ids", "similarity")

    def __init__(self, fused: list[tuple[str, float]], similarity: dict[str, float], keyword_ids: set[str]) -> None:
        self.fused, self.similarity, self.keyword_ids = fused, similarity, keyword_ids

    @property
    def rows(self) -> list[Row]:  # type: ignore[override]  # read-only here
        """Every candidate's row, best first."""
        return [self._row(candidate) for candidate in self.fused]

    def _row(self, candidate: tuple[str, float]) -> Row:
        d = candidate[0]
        return (d, candidate[1], _match_type(d in self.similarity, d in self.keyword_ids), self.similarity.get(d))

    def __len__(self) -> int:
        return len(self.fused)

    def _slice(self, index: slice) -> list[Row]:
        return [self._row(candidate) for candidate in self.fused[index]]

    def ids(self, stop: int) -> list[str]:
        return [candidate[0] for candidate in self.fused[:stop]]


def _rows(ranked: Sequence[SearchResult], start: int, stop: int) -> list[Row]:
    """The rows of candidates ``start`` to ``stop`` of a ranked list."""
    if isinstance(ranked, Ranked):
        return ranked.take(start, stop)
    return [(hit.id, hit.score, hit.match_type, hit.similarity) for hit in ranked[start:stop]]


def _tied_after(ranked: Sequence[SearchResult], start: int, score: float) -> list[Row]:
    """The rows from ``start`` on that still have exactly ``score`` (the run of a tie cut by a page)."""
    stop = start
    while stop < len(ranked) and _rows(ranked, stop, stop + 1)[0][1] == score:
        stop += 1
    return _rows(ranked, start, stop)


def ranked_ids(ranked: Sequence[SearchResult], stop: int) -> list[str]:
    """The ids of the first ``stop`` candidates of a ranked list."""
    return ranked.ids(stop) if isinstance(ranked, Ranked) else [hit.id for hit in ranked[:stop]]


@dataclass(frozen=True)
class SyncedMirrors:
    """A store's in-process mirrors brought up to date for one search (None: not read by that
    search's mode, or not mirrored: RediSearch vectors, BM25 read from Redis)."""

    bm25: BM25Mirror | None = None
    vectors: LocalShard | None = None


def sync_mirrors(user_id: str, stores: Sequence[SemanticStore], mode: SearchMode) -> list[SyncedMirrors]:
    """The BM25 and vector mirrors a ``mode`` search of these stores reads, each brought up to date
    with Redis, their version checks in one round trip for all (not one per index)."""
    return sync_with_reads(user_id, stores, mode)[0]


def sync_with_reads(
    user_id: str, stores: Sequence[SemanticStore], mode: SearchMode, reads: Sequence[Callable[[Any], Any]] = ()
) -> tuple[list[SyncedMirrors], list[Any]]:
    """:func:`sync_mirrors`, with other reads of the user's keys in the version checks' round trip
    (:func:`plan_with_reads`); also their replies."""
    keyword, vector = mode != "vector", mode != "bm25"
    checks = [
        (store.bm25.sync_check(user_id) if keyword else None, store.vectors.sync_check(user_id) if vector else None)
        for store in stores
    ]
    wanted: list[SyncCheck] = [c for pair in checks for c in pair if c is not None]
    if not wanted and not reads:
        return [SyncedMirrors() for _ in stores], []
    found, replies = plan_with_reads(stores[0].connector, wanted, reads)
    plans = iter(found)
    synced = [
        SyncedMirrors(
            store.bm25.synced(user_id, next(plans)) if bm25_check else None,
            store.vectors.synced(user_id, next(plans)) if vector_check else None,
        )
        for store, (bm25_check, vector_check) in zip(stores, checks, strict=True)
    ]
    return synced, replies


@dataclass(frozen=True)
class LiveRead:
    """One ranked candidate list of a store whose first ``limit`` live hits :func:`live_many` reads
    (``window`` > 0, turn stores only: each turn hit with that many neighbours either side)."""

    store: SemanticStore
    ranked: Sequence[SearchResult]
    limit: int
    window: int = 0


Linked = tuple["SemanticStore", list[str], str]  # a store, record ids, the field naming a linked record


def live_many(
    user_id: str, reads: Sequence[LiveRead], also: tuple[SemanticStore, list[str]] | None = None
) -> tuple[list[list[SearchResult]], dict[str, str]]:
    """:func:`live_and_linked` without linked records."""
    lives, extra, _ = live_and_linked(user_id, reads, also)
    return lives, extra


def live_and_linked(
    user_id: str,
    reads: Sequence[LiveRead],
    also: tuple[SemanticStore, list[str]] | None = None,
    linked: Linked | None = None,
) -> tuple[list[list[SearchResult]], dict[str, str], dict[str, str]]:
    """:meth:`SemanticStore.search`'s record reads for several ranked lists (of several stores) in one
    round trip: each list's first ``limit`` records (a list with hits found gone reads its next page
    on its own), the records ``also`` names (a store and ids: read as they are, not checked against
    an index) and ``linked``'s (:meth:`SemanticStore.get_linked` of a store, ids and field). Returns
    each list's live hits, the ``also`` records found and the ``linked`` ones (id -> JSON)."""
    if not reads and not also and not linked:
        return [], {}, {}
    pages = [ranked_ids(read.ranked, read.limit) for read in reads]
    extra_store, extra_ids = also or (None, [])
    linked_store, linked_ids, link = linked or (None, [], "")
    connector = (reads[0].store if reads else extra_store or linked_store).connector  # type: ignore[union-attr]

    def op(r: redis.Redis) -> tuple[list[dict[str, tuple[str, Window | None]]], dict[str, str], dict[str, str]]:
        pipe = r.pipeline(transaction=False)
        for read, ids in zip(reads, pages, strict=True):
            read.store.queue_reads(pipe, user_id, ids, read.window)
        if extra_store is not None:
            extra_store.queue_reads(pipe, user_id, extra_ids)
        if linked_store is not None:
            linked_store.queue_linked(pipe, user_id, linked_ids, link)
        replies = iter(pipe.execute() if len(pipe) else [])
        firsts = [read.store.take_reads(ids, replies, read.window) for read, ids in zip(reads, pages, strict=True)]
        extra = {} if extra_store is None else extra_store.take_reads(extra_ids, replies)
        found = {} if linked_store is None else linked_store.take_linked(linked_ids, replies)
        return firsts, {doc_id: payload for doc_id, (payload, _) in extra.items()}, found

    firsts, extra, found = connector.run(op)
    lives = [
        read.store._live(user_id, read.ranked, read.limit, first, read.window)
        for read, first in zip(reads, firsts, strict=True)
    ]
    return lives, extra, found


class SemanticStore:
    """Records of one namespace with hybrid (RRF of BM25 + vector) search."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        namespace: str,
        vector_index: VectorIndex,
        bm25_index: BM25Index,
        candidate_factor: int = 4,
        rrf_k: int = DEFAULT_K,
        rrf_weights: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        if vector_index.namespace != namespace or bm25_index.namespace != namespace:
            raise ValueError(f"both indexes must use the namespace {namespace!r}")
        self.connector = connector
        self.keys = keys
        self.namespace = check_record_id(namespace, "namespace")
        self.vectors = vector_index
        self.bm25 = bm25_index
        self.candidate_factor = max(1, candidate_factor)
        self.rrf_k = rrf_k
        self.rrf_weights = rrf_weights  # (vector, keyword); lower keyword weights bury exact-token hits
        self._linked: Script | None = None  # get_linked's script, registered on first use

    def _record_key(self, user_id: str, doc_id: str) -> str:
        cached = (self.keys.prefix, self.namespace, user_id, doc_id)
        key = _RECORD_KEYS.get(cached)
        if key is None:  # ids checked once (a search builds ~100 keys)
            key = self.keys.user(user_id).record(self.namespace, doc_id)
            if len(_RECORD_KEYS) >= _KEYS_KEPT:
                _RECORD_KEYS.clear()
            _RECORD_KEYS[cached] = key
        return key

    # -- writes -----------------------------------------------------------------------
    def upsert(
        self,
        user_id: str,
        doc_id: str,
        text: str,
        vector: Any | None,
        payload_json: str,
        ttl_seconds: int | None = None,
    ) -> None:
        """Store the record (first, so a concurrent search never sees an index hit
        without it) and then index its text and vector. ``vector=None`` (no embedder)
        indexes the text only and drops any older vector of the record."""
        key = self._record_key(user_id, doc_id)
        vec = None if vector is None else self.vectors.check_vector(vector)
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")

        def op(r: redis.Redis) -> None:
            r.set(key, payload_json, ex=ttl_seconds)
            r.sadd(self.keys.users(), user_id)  # a global key: never in the same transaction

        self.connector.run(op)
        if vec is None:
            self.vectors.remove(user_id, doc_id)
        else:
            self.vectors.add(user_id, doc_id, vec)
        self.bm25.add(user_id, doc_id, text)

    def upsert_many(
        self, user_id: str, docs: list[tuple[str, str, str]], vectors: Any | None, ttl_seconds: int | None = None
    ) -> None:
        """Batch upsert of ``(doc_id, text, payload_json)``: records in one pipeline, vectors in one call."""
        if not docs:
            return

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for doc_id, _, payload in docs:
                pipe.set(self._record_key(user_id, doc_id), payload, ex=ttl_seconds)
            pipe.sadd(self.keys.users(), user_id)
            pipe.execute()

        self.connector.run(op)
        self.index_many(user_id, [d[0] for d in docs], [d[1] for d in docs], vectors)

    def put_records(self, user_id: str, records: dict[str, str]) -> None:
        """Rewrite records whose indexed text did not change (validity, sources): no re-indexing."""
        if not records:
            return

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for doc_id, payload in records.items():
                pipe.set(self._record_key(user_id, doc_id), payload)
            pipe.execute()

        self.connector.run(op)

    def index_many(self, user_id: str, ids: list[str], texts: list[str], vectors: Any | None) -> None:
        """Index records already stored (e.g. by EpisodeStore): vectors and BM25 one call per batch each."""
        if vectors is not None and ids:
            self.vectors.add_many(user_id, ids, vectors)
        self.bm25.add_many(user_id, list(zip(ids, texts, strict=True)))

    def delete(self, user_id: str, doc_id: str) -> bool:
        """Remove the record and its index entries; True if any of them existed."""
        existed = bool(self.connector.run(lambda r: r.delete(self._record_key(user_id, doc_id))))
        PendingVectors(self.connector, self.keys).forget(user_id, self.namespace, doc_id)  # waits no more
        metas = (self.vectors._key(user_id, "meta"), self.bm25._key(user_id, "meta"))
        if not existed and not self.connector.run(lambda r: r.exists(*metas)):
            return False  # no index to clean: writing a change log would create keys (an opted-out user)
        in_vectors = self.vectors.remove(user_id, doc_id)
        in_bm25 = self.bm25.remove(user_id, doc_id)
        return existed or in_vectors or in_bm25

    # -- reads ------------------------------------------------------------------------
    def get_many(self, user_id: str, ids: Iterable[str]) -> dict[str, str]:
        """Raw JSON by id; missing or expired ids are omitted."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        keys = [self._record_key(user_id, doc_id) for doc_id in ids]
        raws = self.connector.run(lambda r: r.mget(keys))
        return {doc_id: as_text(raw) for doc_id, raw in zip(ids, raws, strict=True) if raw is not None}

    def get_linked(self, user_id: str, ids: Iterable[str], link: str) -> dict[str, str]:
        """:meth:`get_many` of ``ids``, then of the ids their string field ``link`` names (one
        level; not those among the ids found), in one round trip (a Lua script: the second reads
        need the first's replies). Raw JSON by id: the ids found in order, then the linked ones
        found in the order first named."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        keys, args = self._linked_args(user_id, ids, link)

        def op(r: redis.Redis) -> list[Any]:
            if self._linked is None or self._linked.script != _LINKED_LUA:  # (another version's, e.g. a benchmark's)
                self._linked = r.register_script(_LINKED_LUA)
            return self._linked(keys=keys, args=args, client=r)

        return _pairs(self.connector.run(op))

    def queue_linked(self, pipe: Any, user_id: str, ids: Sequence[str], link: str) -> None:
        """Queue :meth:`get_linked` of these (distinct) ids on ``pipe`` (nothing for no ids), for
        :meth:`take_linked`: the script's source goes along (EVAL: a pipeline's EVALSHA would first
        ask whether the script is loaded, a round trip of its own)."""
        if ids:
            keys, args = self._linked_args(user_id, ids, link)
            pipe.execute_command("EVAL", _LINKED_LUA, len(keys), *keys, *args)

    @staticmethod
    def take_linked(ids: Sequence[str], replies: Iterator[Any]) -> dict[str, str]:
        """The records :meth:`queue_linked` asked for, from the pipeline's ``replies``."""
        return _pairs(next(replies)) if ids else {}

    def _linked_args(self, user_id: str, ids: Sequence[str], link: str) -> tuple[list[str], list[str]]:
        keys = [self._record_key(user_id, doc_id) for doc_id in ids]  # prefix + id: the ids go as keys alone
        return keys, [f"{self.keys.user(user_id).base}:{self.namespace}:", link]

    def queue_reads(self, pipe: Any, user_id: str, ids: Sequence[str], window: int = 0) -> None:
        """Queue the reads of these records on ``pipe`` (one MGET, or a GET each in a Redis Cluster
        pipeline, which refuses MGET; nothing for no ids), for :meth:`take_reads`."""
        if not ids:
            return
        keys = [self._record_key(user_id, doc_id) for doc_id in ids]
        if isinstance(pipe, ClusterPipeline):
            for key in keys:
                pipe.get(key)
        else:
            pipe.mget(keys)

    def take_reads(
        self, ids: Sequence[str], replies: Iterator[Any], window: int = 0
    ) -> dict[str, tuple[str, Window | None]]:
        """The records :meth:`queue_reads` asked for, from the pipeline's ``replies``: ``id -> (JSON,
        None)`` for each that exists (a turn store adds its window)."""
        if not ids:
            return {}
        raws = next(replies)
        if not isinstance(raws, list):  # a GET each (Redis Cluster)
            raws = [raws, *(next(replies) for _ in ids[1:])]
        return {doc_id: (as_text(raw), None) for doc_id, raw in zip(ids, raws, strict=True) if raw is not None}

    def count(self, user_id: str) -> int:
        """Indexed vectors (records that expired but were not yet pruned included)."""
        return self.vectors.count(user_id)

    def search(
        self,
        user_id: str,
        query_text: str,
        query_vector: Any | None,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        min_similarity: float = 0.0,
        keyword_hits: list[tuple[str, float]] | None = None,
        mirrors: SyncedMirrors | None = None,
    ) -> list[SearchResult]:
        """Best first. ``min_similarity`` filters vector hits; hybrid without a query
        vector degrades to keyword-only results. ``keyword_hits``: :meth:`keyword_candidates`
        already done; ``mirrors``: from :func:`sync_mirrors` (their version checks already done)."""
        ranked = self.rank(user_id, query_text, query_vector, mode, limit, min_similarity, keyword_hits, mirrors)
        return self._live(user_id, ranked, limit)

    def rank(
        self,
        user_id: str,
        query_text: str,
        query_vector: Any | None,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        min_similarity: float = 0.0,
        keyword_hits: list[tuple[str, float]] | None = None,
        mirrors: SyncedMirrors | None = None,
    ) -> Sequence[SearchResult]:
        """:meth:`search`'s candidates, best first, before their records are read (no Redis call
        when ``mirrors`` are synced): :func:`live_many` reads the records of several at once."""
        if mode not in ("hybrid", "vector", "bm25"):
            raise ValueError(f"unknown search mode {mode!r}")
        if limit <= 0:
            return Ranked([])
        if mode == "vector" and query_vector is None:
            raise ValueError("vector search needs a query vector")
        pool = limit * self.candidate_factor
        synced = mirrors or SyncedMirrors()
        vector_hits: list[tuple[str, float]] = []
        if mode != "bm25" and query_vector is not None:
            vector_hits = self.vectors.search(user_id, query_vector, pool, min_similarity, synced.vectors)
        if mode == "vector":
            keyword_hits = []
        elif keyword_hits is None:
            keyword_hits = self.keyword_candidates(user_id, query_text, limit, synced.bm25)
        if mode == "vector":
            return Ranked([(d, s, "semantic", s) for d, s in vector_hits])
        if mode == "bm25":
            return Ranked([(d, s, "keyword", None) for d, s in keyword_hits])
        similarity = dict(vector_hits)
        keyword_ids = {d for d, _ in keyword_hits}
        # equal scores share a rank ("User loves mint tea", "User loves green tea": the same BM25 score for
        # "Which tea?"), not ranked by their ids (random, or a hash of user and text): issue 14
        fused = fuse_scored([vector_hits, keyword_hits], k=self.rrf_k, weights=list(self.rrf_weights))
        return FusedRanked(fused, similarity, keyword_ids)

    def keyword_candidates(
        self, user_id: str, query_text: str, limit: int, synced: BM25Mirror | None = None
    ) -> list[tuple[str, float]]:
        """The BM25 candidate pool a search for ``limit`` results fuses (best first); ``synced``:
        the user's BM25 mirror from :func:`sync_mirrors`."""
        if not query_text.strip() or limit <= 0:
            return []
        pool = limit * self.candidate_factor
        return [(d, s) for d, s in self.bm25.search(user_id, query_text, pool, synced) if s > 0]

    @property
    def max_fused_score(self) -> float:
        """The hybrid score of a document ranked first in both lists (to scale scores to 0-1)."""
        return max_fused_score(self.rrf_weights, self.rrf_k)

    def _live(
        self,
        user_id: str,
        ranked: Sequence[SearchResult],
        limit: int,
        first: dict[str, tuple[str, Window | None]] | None = None,
        window: int = 0,
    ) -> list[SearchResult]:
        """The first ``limit`` hits whose record still exists, with their records (one MGET when
        none expired: only ``limit`` records are read; ``first``: that first page already read by
        :func:`live_many`); hits found gone are dropped from both indexes."""
        live: list[SearchResult] = []
        gone: list[str] = []
        start = 0
        while start < len(ranked) and len(live) < limit:
            page = _rows(ranked, start, start + (limit if not start else 2 * (limit - len(live))))
            ids = [row[0] for row in page]
            read = first if first is not None and not start else self._read_page(user_id, ids, window)
            for row in page:
                if row[0] in read:
                    payload, turns = read[row[0]]
                    live.append(SearchResult(*row, payload, turns))
                else:
                    gone.append(row[0])
            start += len(page)
        tied = _tied_after(ranked, start, live[limit - 1].score) if 0 < limit <= len(live) else []
        if tied:  # a run of equal scores across the cut: which of it makes the page is decided by its words too
            read = self._read_page(user_id, [row[0] for row in tied], window)
            live += [SearchResult(*row, *read[row[0]]) for row in tied if row[0] in read]
            gone += [row[0] for row in tied if row[0] not in read]
        if gone:
            self._forget(user_id, gone)
        # hits of equal score (keyword-only hits of one BM25 score come in the index's id order) by what they say
        return ties_ordered(live, _score, _content)[:limit]

    def _read(self, r: redis.Redis, user_id: str, ids: list[str], window: int) -> dict[str, tuple[str, Window | None]]:
        pipe = r.pipeline(transaction=False)
        self.queue_reads(pipe, user_id, ids, window)
        return self.take_reads(ids, iter(pipe.execute()), window)

    def _read_page(self, user_id: str, ids: list[str], window: int) -> dict[str, tuple[str, Window | None]]:
        """One page of :meth:`_live`'s reads (one round trip)."""
        return self.connector.run(lambda r: self._read(r, user_id, ids, window))

    def _exists(self, user_id: str, ids: list[str]) -> dict[str, bool]:
        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for doc_id in ids:
                pipe.exists(self._record_key(user_id, doc_id))
            return pipe.execute()

        return {doc_id: bool(n) for doc_id, n in zip(ids, self.connector.run(op), strict=True)}

    def _forget(self, user_id: str, ids: list[str]) -> int:
        """Drop index entries of records that are gone (re-checked to narrow races with upserts)."""
        try:
            still_gone = [d for d, alive in self._exists(user_id, ids).items() if not alive]
            self.vectors.remove_many(user_id, still_gone)
            self.bm25.remove_many(user_id, still_gone)
            return len(still_gone)
        except StorageUnavailable:
            log.warning("could not drop %d expired %s ids from the indexes", len(ids), self.namespace)
            return 0

    def prune(self, user_id: str, batch_size: int = 500) -> int:
        """Remove index entries whose record expired or was deleted; returns how many."""
        ids = list(dict.fromkeys([*self.vectors.ids(user_id), *self.bm25.ids(user_id)]))
        removed = 0
        for start in range(0, len(ids), batch_size):
            batch = ids[start : start + batch_size]
            gone = [d for d, alive in self._exists(user_id, batch).items() if not alive]
            if gone:
                removed += self._forget(user_id, gone)
        return removed


def _score(hit: SearchResult) -> float:
    return hit.score


def _content(hit: SearchResult) -> tuple[float, str, int]:
    return content_order(hit.payload)


def _pairs(reply: list[Any]) -> dict[str, str]:
    """``_LINKED_LUA``'s reply (id, JSON, id, JSON...) as a dict."""
    return {as_text(reply[k]): as_text(reply[k + 1]) for k in range(0, len(reply), 2)}


def _match_type(by_vector: bool, by_keyword: bool) -> MatchType:
    if by_vector and by_keyword:
        return "hybrid"
    return "semantic" if by_vector else "keyword"
