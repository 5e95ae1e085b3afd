"""Per-user vector search: vectors live in Redis, search runs in-process (usearch HNSW).

Redis holds the truth, under ``…:{namespace}:_idx:vec:`` (see :mod:`agtos.storage.index_keys`):

* ``data``     hash ``doc_id -> little-endian blob``: float32 (the vector as given), or float16 for
  an index made with ``storage_dtype="f2"`` (half the bytes)
* ``meta``, ``changes``  the versioned change log of :mod:`agtos.storage.mirror_sync`; ``meta`` also
  names the embedder, dimension and blob dtype of the vectors (their *space*,
  :mod:`agtos.storage.vector_spaces`): a blob is decoded only as its space says, and an index of
  another embedder's space is never searched (a write of ours replaces its vectors; ``agtos reindex``
  embeds their records again)

Each process mirrors a user's vectors into a local shard (a normalised matrix, plus a
usearch HNSW graph once the shard is large) built lazily from Redis. Before every search
the shard compares ``epoch``/``ver`` with Redis and applies the logged changes (or
reloads everything), so a write made by any process is visible to the next search of
every process. Shards smaller than ``hnsw_min_size`` are searched exactly with numpy.

When the server has the RediSearch module, searches use ``FT.SEARCH … KNN`` over one
HASH per document (``…:_idx:vec:doc:{doc_id}``, mirrored on every write) instead.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import redis
from redis.commands.core import Script

from agtos.storage.index_keys import check_namespace, index_key
from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.mirror_sync import (
    LOG_BEGIN_LUA,
    LOG_END_LUA,
    MirrorRegistry,
    SyncCheck,
    SyncPlan,
    advance_after_own_write,
    plan_sync,
)
from agtos.storage.redis_conn import RedisConnector, as_text
from agtos.storage.vector_redisearch import (
    RediSearchVectors,
    has_redisearch,
    knn_command,
    knn_hits,
    missing_index,
)
from agtos.storage.vector_shard import HnswParams, LocalShard
from agtos.storage.vector_spaces import SPACE_LUA, legacy_identity, space_dim, space_name

log = logging.getLogger(__name__)

# KEYS: meta, changes, data. ARGV: op ("set"|"del"|"switch"), epoch candidate, max log size, the
# writer's space, the legacy space, then (id, blob) pairs for "set" or ids for "del". Returns
# {version, docs changed, epoch, 1 if the index switched to the writer's space}.
_WRITE_LUA = (
    SPACE_LUA
    + LOG_BEGIN_LUA
    + """
local changed = 0
local i = 7
while i <= #ARGV do
  local id = ARGV[i]
  if ARGV[1] == 'set' then
    redis.call('HSET', KEYS[3], id, ARGV[i + 1])
    changed = changed + 1
    i = i + 2
  else
    changed = changed + redis.call('HDEL', KEYS[3], id)
    i = i + 1
  end
  redis.call('ZADD', KEYS[2], v, id)
end
"""
    + LOG_END_LUA
    + """
return {v, changed, redis.call('HGET', KEYS[1], 'epoch'), switched}
"""
)

WRITE_BATCH = 500
STORAGE_DTYPES = {"f4": "<f4", "f2": "<f2"}  # blob formats of the data hash (the space names which)
Identity = str | Callable[[], str | None]


class VectorIndex:
    """Cosine-similarity search over one namespace of per-user vectors."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        namespace: str,
        dim: int,
        *,
        connectivity: int = 32,
        expansion_add: int = 128,
        expansion_search: int = 256,
        hnsw_dtype: str = "bf16",
        hnsw_min_size: int = 10_000,
        build_in_background: bool = True,
        build_threads: int = 1,
        max_change_log: int = 10_000,
        max_loaded_users: int = 512,
        use_redisearch: bool | None = None,
        storage_dtype: str = "f4",
        identity: Identity = "unnamed",
    ) -> None:
        """HNSW settings: see :class:`HnswParams`. ``hnsw_min_size``: smaller shards are
        searched exactly. ``max_loaded_users``: least recently used shards beyond it are
        dropped (reloaded from Redis on next use). ``use_redisearch``: None detects the
        module, False never uses it. ``storage_dtype``: ``"f4"`` or ``"f2"`` (float16) blobs in Redis
        (searches always compute in float32; RediSearch's own hashes stay float32). ``identity``:
        ``provider:model`` of the embedder whose vectors this index holds (or a function giving it,
        None while unknown), part of its space (:mod:`agtos.storage.vector_spaces`)."""
        if dim <= 0:
            raise ValueError("dim must be positive")
        if storage_dtype not in STORAGE_DTYPES:
            raise ValueError(f"storage_dtype must be one of {sorted(STORAGE_DTYPES)}")
        self.storage_dtype = STORAGE_DTYPES[storage_dtype]
        self.connector = connector
        self.keys = keys
        self.namespace = check_namespace(namespace)
        self.dim = dim
        self.params = HnswParams(
            connectivity,
            expansion_add,
            expansion_search,
            hnsw_dtype,
            max(1, hnsw_min_size),
            build_in_background,
            build_threads,
        )
        self.max_change_log = max_change_log
        self._use_redisearch = use_redisearch
        self._ft_search = RediSearchVectors(connector, dim, self.params)
        self._shards: MirrorRegistry[LocalShard] = MirrorRegistry(lambda: LocalShard(dim), max_loaded_users)
        self._script: Script | None = None
        self._identity = identity
        self._space: str | None = None
        self._legacy: str | None = None

    @property
    def space(self) -> str | None:
        """The space of the vectors this process writes and searches (None: embedder unknown yet)."""
        if self._space is None:
            identity = self._identity if isinstance(self._identity, str) else self._identity()
            if identity is not None:
                self._space = space_name(identity, self.dim)
        return self._space

    def legacy_space(self) -> str | None:
        """The space of vectors written before spaces were recorded (the deployment's first embedder
        that ran this code); one Redis call per process."""
        if self._legacy is None:
            self._legacy = legacy_identity(self.connector, self.keys, self.space)
        return self._legacy

    def _key(self, user_id: str, part: str) -> str:
        return index_key(self.keys, user_id, self.namespace, f"vec:{part}")

    def check_vector(self, vector: Any) -> np.ndarray:
        """A finite, non-zero float32 vector of this index's dimension, or ValueError."""
        arr = np.asarray(vector, dtype=np.float32).reshape(-1)
        if arr.shape[0] != self.dim:
            raise ValueError(f"vector has dimension {arr.shape[0]} but the {self.namespace!r} index expects {self.dim}")
        if not np.all(np.isfinite(arr)) or not np.any(arr):
            raise ValueError("vector must be finite and non-zero")
        return arr

    def _unit(self, vector: Any) -> np.ndarray:
        arr = self.check_vector(vector)
        return arr / np.linalg.norm(arr)

    # -- writes -----------------------------------------------------------------------
    def add(self, user_id: str, doc_id: str, vector: Any) -> None:
        """Insert or replace one vector."""
        self.add_many(user_id, [doc_id], np.asarray(vector, dtype=np.float32).reshape(1, -1))

    def add_many(self, user_id: str, ids: Sequence[str], matrix: Any) -> None:
        """Insert or replace many vectors (rows of ``matrix``, in the order of ``ids``)."""
        arr = np.asarray(matrix, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(ids):
            raise ValueError(f"expected a ({len(ids)}, {self.dim}) matrix, got shape {arr.shape}")
        vectors = [self.check_vector(row) for row in arr]
        for doc_id in ids:
            check_record_id(doc_id, f"{self.namespace} id")
        for start in range(0, len(ids), WRITE_BATCH):
            chunk = dict(zip(ids[start : start + WRITE_BATCH], vectors[start : start + WRITE_BATCH], strict=True))
            blobs = {doc_id: vec.astype(self.storage_dtype).tobytes() for doc_id, vec in chunk.items()}
            version, _, epoch, _ = self._write(user_id, "set", blobs)
            self._apply_local(user_id, version, epoch, chunk)

    def remove(self, user_id: str, doc_id: str) -> bool:
        """Delete one vector; True if it existed."""
        return self.remove_many(user_id, [doc_id]) > 0

    def remove_many(self, user_id: str, ids: Sequence[str]) -> int:
        """Delete vectors; how many existed."""
        removed = 0
        for doc_id in ids:
            check_record_id(doc_id, f"{self.namespace} id")
        for start in range(0, len(ids), WRITE_BATCH):
            chunk = dict.fromkeys(ids[start : start + WRITE_BATCH])
            version, changed, epoch, _ = self._write(user_id, "del", chunk)
            self._apply_local(user_id, version, epoch, chunk)
            removed += changed
        return removed

    def switch(self, user_id: str) -> bool:
        """Make the user's index one of this process's space now (a ``reindex``): vectors of another
        embedder are dropped (their space noted in ``reindex``); True if there were any."""
        return self._write(user_id, "switch", {})[3]  # a new epoch: every mirror reloads

    def reindex_done(self, user_id: str) -> None:
        """Clear the note that the user's records lack vectors of this space (``agtos reindex`` did them)."""
        self.connector.run(lambda r: r.hdel(self._key(user_id, "meta"), "reindex"))

    def _write(self, user_id: str, op: str, docs: Mapping[str, bytes | None]) -> tuple[int, int, bytes, bool]:
        """Run the write script (plus the RediSearch mirror); returns (version, changed, epoch,
        whether the index switched to this process's space)."""
        space = self.space
        if space is None and op != "del":
            raise ValueError(f"the {self.namespace!r} index does not know its embedder yet: no vectors written")
        keys = [self._key(user_id, p) for p in ("meta", "changes", "data")]
        args: list[Any] = [op, uuid.uuid4().hex, self.max_change_log, space or "", self.legacy_space() or ""]
        args.append(self.storage_dtype[1:])
        for doc_id, blob in docs.items():
            args += [doc_id, blob] if op == "set" else [doc_id]
        doc_prefix = self._ft(user_id)[1] if self._redisearch() else None

        def run(r: redis.Redis) -> list[Any]:
            if self._script is None:
                self._script = r.register_script(_WRITE_LUA)
            if doc_prefix is None:  # the script alone (Redis Cluster refuses scripts in pipelines)
                return self._script(keys=keys, args=args, client=r)
            pipe = r.pipeline(transaction=True)
            self._script(keys=keys, args=args, client=pipe)
            if doc_prefix is not None:  # mirror into the hashes RediSearch indexes
                for doc_id, blob in docs.items():
                    if blob is None:
                        pipe.delete(doc_prefix + doc_id)
                    else:  # the FT schema is FLOAT32
                        pipe.hset(doc_prefix + doc_id, "v", self._as_f4(blob))
            return pipe.execute()[0]

        version, changed, epoch, switched = self.connector.run(run)
        if switched:
            log.warning(
                "%s vectors of user %r were made by another embedder: dropped, their records are keyword-only "
                "until `agtos reindex`",
                self.namespace,
                user_id,
            )
            if doc_prefix is not None:  # its FT index (and documents) hold the old vectors: made again
                self._drop_ft(user_id)
        return int(version), int(changed), bytes(epoch), bool(switched)

    def _apply_local(self, user_id: str, version: int, epoch: bytes, docs: dict[str, Any]) -> None:
        """Mirror this process's own write into its loaded shard (after a switch, a write of a new
        epoch, the shard is reloaded on next use)."""
        shard = self._shards.peek(user_id)
        if shard is None:
            return
        with shard.lock:
            if not shard.loaded:
                return
            for doc_id, vec in docs.items():
                if vec is None:
                    shard.drop(doc_id)
                else:
                    shard.put(doc_id, vec / np.linalg.norm(vec))
            advance_after_own_write(shard, version, epoch)
            if shard.space is None and shard.version == version:  # its vectors are ours
                shard.space = self.space

    # -- reads ------------------------------------------------------------------------
    def prepare(self, user_id: str) -> LocalShard | None:
        """The user's mirror brought up to date now (None when RediSearch serves searches): pass
        it to :meth:`search` to do the Redis version check off the query's critical path."""
        return None if self._redisearch() else self.synced(user_id)

    def sync_check(self, user_id: str) -> SyncCheck | None:
        """What :func:`~agtos.storage.mirror_sync.plan_many` compares for this user (None when
        RediSearch serves searches)."""
        if self._redisearch():
            return None
        return SyncCheck(self._key(user_id, "meta"), self._key(user_id, "changes"), self._shards.get(user_id))

    def search(
        self,
        user_id: str,
        query_vector: Any,
        limit: int,
        min_similarity: float = 0.0,
        prepared: LocalShard | None = None,
    ) -> list[tuple[str, float]]:
        """``(doc_id, cosine similarity)`` best first, similarity >= ``min_similarity``.
        ``prepared``: this user's shard from :meth:`prepare` (synced at that moment)."""
        unit = self._unit(query_vector)
        if limit <= 0:
            return []
        if self._redisearch():
            hits = self._ft_knn(user_id, unit, limit)
        else:
            shard = prepared or self.synced(user_id)
            with shard.lock:
                hits = shard.search(unit, limit) if self.searchable(shard) else []
        return [(doc_id, sim) for doc_id, sim in hits if sim >= min_similarity]

    def exact_search(
        self, user_id: str, query_vector: Any, limit: int, min_similarity: float = 0.0
    ) -> list[tuple[str, float]]:
        """Brute-force cosine over all stored vectors (the recall baseline)."""
        unit = self._unit(query_vector)
        shard = self.synced(user_id)
        with shard.lock:
            hits = shard.exact(unit, limit) if self.searchable(shard) else []
        return [(doc_id, sim) for doc_id, sim in hits if sim >= min_similarity]

    def missing(self, user_id: str, ids: Sequence[str]) -> list[str]:
        """The ``ids`` without a stored vector (one round trip)."""
        key = self._key(user_id, "data")

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for doc_id in ids:
                pipe.hexists(key, doc_id)
            return pipe.execute()

        found = self.connector.run(op) if ids else []
        return [doc_id for doc_id, there in zip(ids, found, strict=True) if not there]

    def searchable(self, shard: LocalShard) -> bool:
        """Whether the shard's vectors are of this process's space (an empty index's are)."""
        return shard.space is None or shard.space == self.space

    def count(self, user_id: str) -> int:
        return int(self.connector.run(lambda r: r.hlen(self._key(user_id, "data"))))

    def ids(self, user_id: str, batch_size: int = 1_000) -> Iterator[str]:
        """Every stored document id (HSCAN; order unspecified)."""
        for doc_id, _ in self._scan(user_id, batch_size):
            yield doc_id

    def stats(self) -> dict[str, Any]:
        """Backend, parameters and the size of this process's loaded shards."""
        shards = self._shards.values()
        docs = memory = with_graph = 0
        for shard in shards:
            with shard.lock:
                docs += len(shard.rows)
                memory += shard.memory_bytes
                with_graph += shard.hnsw is not None
        p = self.params
        return {
            "namespace": self.namespace,
            "dim": self.dim,
            "backend": "redisearch" if self._redisearch() else "usearch",
            "loadedUsers": len(shards),
            "hnswUsers": with_graph,
            "docs": docs,
            "memoryBytes": memory,
            "params": {
                "connectivity": p.connectivity,
                "expansionAdd": p.expansion_add,
                "expansionSearch": p.expansion_search,
                "dtype": p.dtype,
                "hnswMinSize": p.min_size,
                "buildThreads": p.threads,
            },
        }

    def wait_for_builds(self, user_id: str, timeout_s: float = 60.0) -> bool:
        """Block until no background HNSW build runs for the user (tests, warm-up)."""
        return self._shards.get(user_id).wait_idle(timeout_s)

    # -- local shard sync -------------------------------------------------------------
    def synced(self, user_id: str, plan: SyncPlan | None = None) -> LocalShard:
        """The user's shard, brought up to date with Redis (one round trip when fresh); ``plan``:
        from a version check already made, used while the shard is still as it was then."""
        shard = self._shards.get(user_id)
        with shard.lock:
            if plan is None or not plan.fits(shard):
                plan = plan_sync(self.connector, self._key(user_id, "meta"), self._key(user_id, "changes"), shard)
            if plan.action == "apply":
                ids = plan.changed_ids
                blobs = self.connector.run(lambda r: r.hmget(self._key(user_id, "data"), ids)) if ids else []
                for doc_id, blob in zip(ids, blobs, strict=True):
                    vec = self._decode(doc_id, blob)
                    if vec is None:
                        shard.drop(doc_id)
                    else:
                        shard.put(doc_id, vec)
                shard.version = plan.version
            elif plan.action == "reload":
                self._reload(user_id, shard, plan.epoch, plan.version)
            shard.maybe_build(self.params)
            return shard

    def _reload(self, user_id: str, shard: LocalShard, epoch: bytes | None, version: int) -> None:
        """Rebuild the shard from the data hash (``version`` was read before the scan); vectors of another
        space are not read (the shard keeps that space: never searched)."""
        shard.reset()
        shard.space = space = self._stored_space(user_id)
        mine = self.space
        if space is None or space == mine or (mine is None and space_dim(space) == self.dim):
            for doc_id, blob in self._scan(user_id):
                vec = self._decode(doc_id, blob)
                if vec is not None:
                    shard.put(doc_id, vec)
        # a switch during the scan changes the space (and the epoch): then the next sync reloads
        shard.loaded, shard.epoch, shard.version = space == self._stored_space(user_id), epoch, version

    def _stored_space(self, user_id: str) -> str | None:
        """The space recorded for the user's index (the legacy one for vectors written before spaces
        were recorded; None for an index without vectors)."""
        meta, data = self._key(user_id, "meta"), self._key(user_id, "data")

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hget(meta, "space")
            pipe.exists(data)
            return pipe.execute()

        return self._space_of(*self.connector.run(op))

    def _space_of(self, recorded: Any, has_data: Any) -> str | None:
        """The space of an index from its meta's ``space`` and whether it holds vectors."""
        if recorded is not None:
            return str(as_text(recorded))
        return self.legacy_space() if has_data else None

    def _scan(self, user_id: str, batch_size: int = 1_000) -> Iterator[tuple[str, bytes]]:
        return self.connector.scan_hash(self._key(user_id, "data"), batch_size)

    def vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored unit vectors of ``ids`` (missing ones omitted), read straight from Redis."""
        if not ids:
            return {}
        blobs = self.connector.run(lambda r: r.hmget(self._key(user_id, "data"), list(ids)))
        if not any(isinstance(blob, bytes) for blob in blobs):
            return {}
        space = self._stored_space(user_id)
        if space != self.space:  # another embedder's vectors: none of them is comparable with ours
            return {}
        decoded = {doc_id: self._decode(doc_id, blob) for doc_id, blob in zip(ids, blobs, strict=True)}
        return {doc_id: vec for doc_id, vec in decoded.items() if vec is not None}

    def _blob_dtype(self, blob: bytes) -> str | None:
        """How a blob of this index's space (its dimension) is read: float32 when 4 bytes a value long,
        float16 when 2 (the lengths differ at one dimension); None for any other length. Never used on
        the blobs of another space (another dimension could make a float32 blob look float16)."""
        return {4 * self.dim: "<f4", 2 * self.dim: "<f2"}.get(len(blob))

    def _as_f4(self, blob: bytes) -> bytes:
        return blob if self._blob_dtype(blob) != "<f2" else np.frombuffer(blob, dtype="<f2").astype("<f4").tobytes()

    def _decode(self, doc_id: str, blob: bytes | str | None) -> np.ndarray | None:
        """A stored blob of this index's space as a unit vector; None when deleted or unusable."""
        if not isinstance(blob, bytes):  # None: deleted (the connector never decodes replies to str)
            return None
        dtype = self._blob_dtype(blob)
        if dtype is None:
            log.warning("skipping stored vector %r: %d bytes, not a %d-d vector", doc_id, len(blob), self.dim)
            return None
        vec = np.frombuffer(blob, dtype=dtype).astype(np.float32)
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm and np.isfinite(norm) else None

    # -- RediSearch path (only when the server has the module) ------------------------
    def _redisearch(self) -> bool:
        if self._use_redisearch is None:
            self._use_redisearch = has_redisearch(self.connector)
        return self._use_redisearch

    def _ft_knn(self, user_id: str, unit: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """KNN through the user's FT index. A read never creates the index of a user with no vectors
        (a forgotten user stays without one); an index dropped since this process made it (a
        forget-all, here or elsewhere) is created again when the user has vectors."""
        name = self._key(user_id, "ft")
        for attempt in (0, 1):
            if not self._ft_search.is_ready(name) and self.count(user_id) == 0:
                return []
            try:
                return self._ft_knn_of_space(user_id, *self._ft(user_id), unit, limit)
            except redis.ResponseError as exc:
                if attempt or not missing_index(exc):
                    raise
                self._ft_search.forget(name)
        return []

    def _ft_knn_of_space(
        self, user_id: str, name: str, prefix: str, unit: np.ndarray, limit: int
    ) -> list[tuple[str, float]]:
        """The KNN, and in its round trip the index's space: no hits from another embedder's vectors."""

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.hget(self._key(user_id, "meta"), "space")
            pipe.exists(self._key(user_id, "data"))
            pipe.execute_command(*knn_command(name, unit, limit))
            return pipe.execute()

        recorded, has_data, reply = self.connector.run(op)
        space = self._space_of(recorded, has_data)
        return knn_hits(prefix, reply) if space is None or space == self.space else []

    def _drop_ft(self, user_id: str) -> None:
        """Drop the user's FT index with its documents (made again from the data hash on next use)."""
        name = self._key(user_id, "ft")

        def op(r: redis.Redis) -> None:
            try:
                r.execute_command("FT.DROPINDEX", name, "DD")
            except redis.ResponseError as exc:
                if not missing_index(exc):
                    raise

        self.connector.run(op)
        self._ft_search.forget(name)

    def _ft(self, user_id: str) -> tuple[str, str]:
        """The user's FT index name and document key prefix (the index created if needed)."""
        name, prefix = self._key(user_id, "ft"), self._key(user_id, "doc:")
        self._ft_search.ensure(name, prefix, lambda: ((d, self._as_f4(b)) for d, b in self._scan(user_id)))
        return name, prefix
