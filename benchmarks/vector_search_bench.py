"""Search latency of VectorIndex: HNSW (usearch) vs exact numpy, on random 384-d unit vectors.

Usage: ``.venv/bin/python benchmarks/vector_search_bench.py [redis_url] [sizes...]``.
Writes under a throw-away key prefix and deletes it afterwards. Not a test.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_index import VectorIndex

DIM, QUERIES, K = 384, 200, 10


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def ms(samples: list[float]) -> str:
    a = np.array(samples) * 1e3
    return f"p50 {np.percentile(a, 50):6.2f} ms  p95 {np.percentile(a, 95):6.2f} ms"


def bench(url: str, n: int) -> None:
    rng = np.random.default_rng(n)
    vectors, queries = unit_rows(rng, n), unit_rows(rng, QUERIES)
    prefix = f"agtos-bench-{uuid.uuid4().hex[:8]}"
    connector = RedisConnector(url, Path(tempfile.gettempdir()))
    index = VectorIndex(
        connector,
        GlobalKeys(prefix),
        "bench",
        DIM,
        hnsw_min_size=1,
        build_in_background=False,
        build_threads=0,
    )
    try:
        t = time.perf_counter()
        index.add_many("u", [f"d{i}" for i in range(n)], vectors)
        write_s = time.perf_counter() - t
        t = time.perf_counter()
        index.search("u", queries[0], K)  # loads the shard from Redis and builds the graph
        load_s = time.perf_counter() - t
        shard = index._shard("u")
        hnsw_e2e, exact_e2e, hnsw_cpu, exact_cpu, found = [], [], [], [], 0
        for q in queries:
            t = time.perf_counter()
            approx = index.search("u", q, K, min_similarity=-1)
            hnsw_e2e.append(time.perf_counter() - t)
            t = time.perf_counter()
            exact = index.exact_search("u", q, K, min_similarity=-1)
            exact_e2e.append(time.perf_counter() - t)
            found += len({d for d, _ in approx} & {d for d, _ in exact})
            t = time.perf_counter()
            shard.approximate(q, K)
            hnsw_cpu.append(time.perf_counter() - t)
            t = time.perf_counter()
            shard.exact(q, K)
            exact_cpu.append(time.perf_counter() - t)
        memory_mib = index.stats()["memoryBytes"] / 2**20
        print(
            f"n={n:,}  write to Redis {write_s:.1f}s  load+HNSW build {load_s:.1f}s  "
            f"shard memory {memory_mib:.0f} MiB  recall@10 {found / (K * QUERIES):.3f}"
        )
        print(f"  HNSW  search() {ms(hnsw_e2e)}   in-process only {ms(hnsw_cpu)}")
        print(f"  exact search() {ms(exact_e2e)}   in-process only {ms(exact_cpu)}")
    finally:
        client = redis.Redis.from_url(url)
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
        connector.close()


if __name__ == "__main__":
    redis_url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
    for size in [int(s) for s in sys.argv[2:]] or [10_000, 100_000]:
        bench(redis_url, size)
