"""Vector KNN through the RediSearch module, used only when the server has it.

Each document is a HASH ``{doc_prefix}{doc_id}`` with field ``v`` (float32 blob);
one ``FT.CREATE … VECTOR HNSW`` index per user and namespace covers that prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import redis
from redis.cluster import RedisCluster

from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_shard import HnswParams

FIELD = "v"


def has_redisearch(connector: RedisConnector) -> bool:
    """True when ``FT._LIST`` is a known command (RediSearch / Redis Stack / Redis 8).

    Always False on Redis Cluster: per-shard FT indexes cannot answer a user's KNN there,
    so the in-process HNSW mirror serves vectors instead."""

    def probe(r: redis.Redis) -> bool:
        if isinstance(r, RedisCluster):
            return False
        try:
            r.execute_command("FT._LIST")
            return True
        except redis.ResponseError:
            return False

    return bool(connector.run(probe))


def missing_index(exc: redis.ResponseError) -> bool:
    """The error RediSearch answers for an index that does not exist (e.g. dropped by a forget)."""
    text = str(exc).lower()
    return "no such index" in text or "unknown index name" in text


def drop_indexes(connector: RedisConnector, name_prefix: str) -> list[str]:
    """Drop every FT index whose name starts with ``name_prefix`` (e.g. a forgotten user's key base);
    returns their names, none when the server has no RediSearch. Their documents are left alone."""

    def op(r: redis.Redis) -> list[str]:
        if isinstance(r, RedisCluster):
            return []
        try:
            names = [_text(n) for n in r.execute_command("FT._LIST")]
        except redis.ResponseError:
            return []
        dropped = []
        for name in names:
            if name.startswith(name_prefix):
                try:
                    r.execute_command("FT.DROPINDEX", name)
                    dropped.append(name)
                except redis.ResponseError as exc:  # dropped meanwhile by another process
                    if not missing_index(exc):
                        raise
        return dropped

    return list(connector.run(op))


class RediSearchVectors:
    """Create the per-user FT index lazily and run KNN queries against it."""

    def __init__(self, connector: RedisConnector, dim: int, params: HnswParams) -> None:
        self.connector = connector
        self.dim = dim
        self.params = params
        self._ready: set[str] = set()

    def ensure(self, name: str, doc_prefix: str, existing: Callable[[], Iterable[tuple[str, bytes]]]) -> None:
        """Create index ``name`` once; on creation copy in ``existing`` (id, blob) pairs."""
        if name in self._ready:
            return
        p = self.params
        create = [
            "FT.CREATE", name, "ON", "HASH", "PREFIX", "1", doc_prefix, "SCHEMA", FIELD, "VECTOR", "HNSW",
            "12", "TYPE", "FLOAT32", "DIM", str(self.dim), "DISTANCE_METRIC", "COSINE",
            "M", str(p.connectivity), "EF_CONSTRUCTION", str(p.expansion_add),
            "EF_RUNTIME", str(p.expansion_search),
        ]  # fmt: skip

        def run(r: redis.Redis) -> bool:
            try:
                r.execute_command(*create)
                return True
            except redis.ResponseError as exc:
                if "already exists" not in str(exc).lower():
                    raise
                return False

        if self.connector.run(run):
            batch: list[tuple[str, bytes]] = []
            for item in existing():
                batch.append(item)
                if len(batch) >= 500:
                    self._copy(doc_prefix, batch)
                    batch = []
            self._copy(doc_prefix, batch)
        self._ready.add(name)

    def is_ready(self, name: str) -> bool:
        """Whether this process created (or found) index ``name``."""
        return name in self._ready

    def forget(self, name: str) -> None:
        """Let the next ``ensure`` create ``name`` again (it was dropped, e.g. by a forget)."""
        self._ready.discard(name)

    def _copy(self, doc_prefix: str, batch: list[tuple[str, bytes]]) -> None:
        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for doc_id, blob in batch:
                pipe.hset(doc_prefix + doc_id, FIELD, blob)
            pipe.execute()

        if batch:
            self.connector.run(op)

    def knn(self, name: str, doc_prefix: str, unit: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """``(doc_id, cosine similarity)`` best first."""
        reply = self.connector.run(lambda r: r.execute_command(*knn_command(name, unit, limit)))
        return knn_hits(doc_prefix, reply)


def knn_command(name: str, unit: np.ndarray, limit: int) -> list[Any]:
    """The FT.SEARCH of the ``limit`` nearest documents of index ``name`` (for a pipeline)."""
    return [
        "FT.SEARCH", name, f"*=>[KNN {int(limit)} @{FIELD} $vec AS dist]",
        "PARAMS", "2", "vec", unit.astype("<f4").tobytes(), "SORTBY", "dist",
        "RETURN", "1", "dist", "LIMIT", "0", str(int(limit)), "DIALECT", "2",
    ]  # fmt: skip


def knn_hits(doc_prefix: str, reply: Any) -> list[tuple[str, float]]:
    """``(doc_id, cosine similarity)`` of a :func:`knn_command` reply, best first."""
    return [(key[len(doc_prefix) :], 1.0 - dist) for key, dist in _search_rows(reply)]


def _search_rows(reply: Any) -> list[tuple[str, float]]:
    """``(key, dist)`` rows of an FT.SEARCH reply in either protocol: RESP2 ``[total, key, fields, …]``
    or RESP3 ``{"results": [{"id": key, "extra_attributes": {"dist": …}}, …]}`` (redis-py ≥ 8's default)."""
    if isinstance(reply, dict):
        results = {_text(k): v for k, v in reply.items()}.get("results") or []
        rows = []
        for row in results:
            fields = {_text(k): v for k, v in row.items()}
            attrs = {_text(k): v for k, v in (fields.get("extra_attributes") or {}).items()}
            rows.append((_text(fields["id"]), float(attrs.get("dist", 1.0))))
        return rows
    rows = []
    for key, fields in zip(reply[1::2], reply[2::2], strict=False):
        values = {_text(f): v for f, v in zip(fields[::2], fields[1::2], strict=False)}
        rows.append((_text(key), float(values.get("dist", 1.0))))
    return rows


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
