"""One user's in-process vector mirror: a normalised matrix plus an optional HNSW graph.

Rows of the matrix double as usearch keys. Small shards are searched exactly; once a
shard reaches ``HnswParams.min_size`` a graph is built (in a background thread by
default, replaying rows changed meanwhile) and kept in sync on every put/drop.
Callers hold ``shard.lock`` around every method.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import tokenizers  # noqa: F401 - keep before usearch: usearch loaded before onnxruntime segfaults on import
from usearch.index import Index

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HnswParams:
    """usearch settings; the defaults reach recall@10 ≈ 0.99 on 5k random 384-d vectors."""

    connectivity: int = 32
    expansion_add: int = 128
    expansion_search: int = 256
    dtype: str = "bf16"  # graph copy only: hits are re-scored on the float32 matrix
    min_size: int = 10_000  # smaller shards are searched exactly
    background: bool = True
    threads: int = 1  # build threads (0: all cores); 1 keeps a background build gentle

    def new_index(self, dim: int) -> Index:
        return Index(
            ndim=dim,
            metric="cos",
            dtype=self.dtype,
            connectivity=self.connectivity,
            expansion_add=self.expansion_add,
            expansion_search=self.expansion_search,
        )


@dataclass
class LocalShard:
    dim: int
    lock: threading.RLock = field(default_factory=threading.RLock)
    loaded: bool = False
    epoch: bytes | None = None  # the Redis index life this mirror belongs to
    version: int = 0  # the Redis write version this mirror reflects
    space: str | None = None  # the embedder space of its vectors (agtos.storage.vector_spaces; None: empty)
    generation: int = 0  # bumped on reset; stale background builds are discarded
    rows: dict[str, int] = field(default_factory=dict)
    ids: list[str | None] = field(default_factory=list)
    free: list[int] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    hnsw: Index | None = None
    hnsw_dead: int = 0
    touched: set[int] | None = None  # rows changed while a build runs (None: no build)

    def reset(self) -> None:
        self.generation += 1
        self.rows, self.ids, self.free = {}, [], []
        self.matrix = np.zeros((64, self.dim), np.float32)
        self.alive = np.zeros(64, bool)
        self.hnsw, self.hnsw_dead, self.touched = None, 0, None

    @property
    def memory_bytes(self) -> int:
        graph = int(self.hnsw.memory_usage) if self.hnsw is not None else 0
        return self.matrix.nbytes + self.alive.nbytes + graph

    def put(self, doc_id: str, unit: np.ndarray) -> None:
        """Insert or replace a unit vector."""
        row = self.rows.get(doc_id)
        if row is None:
            row = self.free.pop() if self.free else len(self.ids)
            if row == len(self.ids):
                self.ids.append(None)
            if row >= len(self.matrix):
                grow = max(64, len(self.matrix))
                self.matrix = np.vstack([self.matrix, np.zeros((grow, self.dim), np.float32)])
                self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
            self.rows[doc_id], self.ids[row] = row, doc_id
        self.matrix[row], self.alive[row] = unit, True
        if self.hnsw is not None:
            if row in self.hnsw:
                self.hnsw.remove(row)
            self.hnsw.add(row, unit)
        if self.touched is not None:
            self.touched.add(row)

    def drop(self, doc_id: str) -> None:
        row = self.rows.pop(doc_id, None)
        if row is None:
            return
        self.ids[row], self.alive[row] = None, False
        self.free.append(row)
        if self.hnsw is not None and row in self.hnsw:
            self.hnsw.remove(row)
            self.hnsw_dead += 1
        if self.touched is not None:
            self.touched.add(row)

    def search(self, unit: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """Through the graph when there is one, else exact."""
        return self.approximate(unit, limit) if self.hnsw is not None else self.exact(unit, limit)

    def exact(self, unit: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """Brute-force cosine over every live row, best first."""
        n = len(self.ids)
        if not self.rows or limit <= 0:
            return []
        sims = self.matrix[:n] @ unit
        sims[~self.alive[:n]] = -np.inf
        k = min(limit, len(self.rows))
        best = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        best = best[np.argsort(-sims[best], kind="stable")][:k]
        return [(self.ids[r], float(sims[r])) for r in best if self.alive[r]]

    def approximate(self, unit: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """HNSW candidates, re-scored exactly on the float32 matrix."""
        assert self.hnsw is not None
        keys = np.asarray(self.hnsw.search(unit, limit + 10).keys, dtype=np.int64)
        rows = keys[self.alive[keys]]  # one mask for all candidates, not a numpy scalar each
        if not len(rows):
            return []
        sims = self.matrix[rows] @ unit
        order = np.argsort(-sims, kind="stable")[:limit]
        ids = self.ids
        return [(ids[row], sim) for row, sim in zip(rows[order].tolist(), sims[order].tolist(), strict=True)]

    def maybe_build(self, params: HnswParams) -> None:
        """(Re)build the graph when the shard is big enough or half its nodes are tombstones."""
        size = len(self.rows)
        if self.touched is not None or size < params.min_size:
            return
        if self.hnsw is not None and self.hnsw_dead <= size:
            return
        self.touched = set()
        keys = np.fromiter(self.rows.values(), dtype=np.uint64, count=size)
        vectors = self.matrix[keys.astype(np.int64)].copy()
        generation = self.generation

        def build() -> None:
            try:
                graph = params.new_index(self.dim)
                graph.add(keys, vectors, threads=params.threads)
            except Exception:
                log.exception("HNSW build failed; searches stay exact")
                with self.lock:
                    if self.generation == generation:
                        self.touched = None
                return
            with self.lock:
                if self.generation != generation:
                    return  # reloaded meanwhile
                for row in self.touched or ():
                    if row in graph:
                        graph.remove(row)
                    if self.alive[row]:
                        graph.add(row, self.matrix[row])
                self.hnsw, self.hnsw_dead, self.touched = graph, 0, None

        if params.background:
            threading.Thread(target=build, name="hnsw-build", daemon=True).start()
        else:
            build()

    def wait_idle(self, timeout_s: float) -> bool:
        """True once no build runs (call without holding the lock)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if self.touched is None:
                    return True
            time.sleep(0.01)
        return False
