"""What the BM25 tokenizer upgrade (issue 14: plural-folded terms -> Snowball stems) costs for one
user's index, and whether searches answer while it runs.

Stores ``--docs`` synthetic chat turns (words of :mod:`benchmarks.corpus`'s episodes, Zipf-chosen;
lengths log-normal, median 20 words, 3-200) as the older tokenizer stored them, under a throw-away key
prefix, then times the upgrade (``BM25Index.upgrade``) while another process searches the index in a
loop (Redis postings and the in-process mirror). ``--compare REV`` upgrades the same index with
``REV``'s ``agtos/storage/bm25_index.py`` first (stored again in between), in the same run; peak
Python memory of each upgrade is measured in a second pass with tracemalloc.

    python -m benchmarks.bm25_upgrade [--docs 100000] [--compare 241b4cd] [--redis-url redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import random
import statistics
import subprocess
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import redis

from agtos.storage import bm25_index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25
from agtos.tasks.text import STOPWORDS, words
from benchmarks.corpus import make_episode

USER = "bench"
QUERIES = ("what did we cook for dinner", "hiking trip in the mountains", "the concert tickets", "pottery class")


def turns(n: int, seed: int = 7) -> list[tuple[str, str]]:
    vocab = sorted({w for i in range(3_000) for w in make_episode(seed, i).summary.lower().split()})
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    rng.shuffle(vocab)
    out = []
    for i in range(n):
        length = min(200, max(3, round(rng.lognormvariate(3.0, 0.6))))
        out.append((f"t{i:07d}", " ".join(rng.choices(vocab, weights, k=length))))
    return out


def older_tokenize(text: str) -> list[str]:
    return [bm25.light_stem(w) for w in words(text) if 1 < len(w) <= bm25.MAX_TERM_LENGTH and w not in STOPWORDS]


def drop(client: redis.Redis, pattern: str) -> None:
    for key in client.scan_iter(match=pattern, count=10_000):
        client.unlink(key)


def store_older(module: ModuleType, connector: RedisConnector, keys: GlobalKeys, docs: list[tuple[str, str]]) -> None:
    index = module.BM25Index(connector, keys, "turn")
    tokenize, version = bm25.tokenize, bm25.TOKENIZER_VERSION
    bm25.tokenize, bm25.TOKENIZER_VERSION = older_tokenize, 1
    try:
        index.add_many(USER, docs)
    finally:
        bm25.tokenize, bm25.TOKENIZER_VERSION = tokenize, version
    connector.run(lambda r: r.hdel(index._key(USER, "meta"), "tok"))


def searcher(url: str, prefix: str, mirror: bool, stop_key: str, out: Any) -> None:
    """Another API process, which finds the upgrade's lock held (so it reads the index as it is):
    searches in a loop until ``stop_key`` is set; (wall clock, latency, hits or -1 for an error)."""
    connector = RedisConnector(url, Path(tempfile.mkdtemp()))
    index = bm25_index.BM25Index(connector, GlobalKeys(prefix), "turn", mirror=mirror)
    index._current.add(USER)  # what upgrade() does while another process holds the lock: nothing
    index.search(USER, QUERIES[0], 10)  # the mirror loaded
    connector.run(lambda r: r.set(f"{stop_key}:ready:{mirror}", 1))
    rows, i = [], 0
    while not connector.run(lambda r: r.exists(stop_key)):
        at, start = time.time(), time.perf_counter()
        try:
            hits = len(index.search(USER, QUERIES[i % len(QUERIES)], 10))
        except Exception:  # counted: the point is whether searches answer
            hits = -1
        rows.append((at, time.perf_counter() - start, hits))
        i += 1
        time.sleep(0.01)
    out.put((mirror, rows))


def load_revision(rev: str) -> ModuleType:
    source = subprocess.run(["git", "show", f"{rev}:agtos/storage/bm25_index.py"], capture_output=True, check=True)
    path = Path(tempfile.mkdtemp()) / f"bm25_index_{rev}.py"
    path.write_bytes(source.stdout)
    spec = importlib.util.spec_from_file_location(f"bm25_index_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(name: str, module: ModuleType, url: str, docs: list[tuple[str, str]]) -> None:
    prefix = f"bench-upg-{uuid.uuid4().hex[:8]}"
    keys = GlobalKeys(prefix)
    connector = RedisConnector(url, Path(tempfile.mkdtemp()))
    client = redis.Redis.from_url(url)
    try:
        store_older(module, connector, keys, docs)
        used = client.info("memory")["used_memory"]
        stop = f"{prefix}:stop"
        queue: Any = mp.get_context("spawn").Queue()
        procs = [
            mp.get_context("spawn").Process(target=searcher, args=(url, prefix, m, stop, queue)) for m in (False, True)
        ]
        for p in procs:
            p.start()
        while client.exists(f"{stop}:ready:False", f"{stop}:ready:True") < 2:
            time.sleep(0.1)
        t0, start = time.time(), time.perf_counter()
        upgraded = module.BM25Index(connector, keys, "turn").upgrade(USER)
        took, t1 = time.perf_counter() - start, time.time()
        used_after = client.info("memory")["used_memory"]
        time.sleep(0.5)
        client.set(stop, 1)
        results = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join()
        n_docs = connector.run(lambda r: r.hlen(module.BM25Index(connector, keys, "turn")._key(USER, "len")))
        print(
            f"{name}: upgraded={upgraded} {len(docs):,} docs in {took:.2f} s = {1000 * took / len(docs):.3f} ms/doc; "
            f"docs after {n_docs:,}; Redis used {used / 2**20:.0f} -> {used_after / 2**20:.0f} MiB"
        )
        for mirror, rows in sorted(results):
            during = [(lat, hits) for at, lat, hits in rows if t0 <= at <= t1]
            lat = [x for x, _ in during] or [0.0]
            print(
                f"  searches during it ({'mirror' if mirror else 'redis postings'}): {len(during)}, "
                f"{sum(h < 0 for _, h in during)} errors, {sum(h == 0 for _, h in during)} with no hit, "
                f"p50 {1000 * statistics.median(lat):.1f} ms, max {1000 * max(lat):.1f} ms"
            )
        drop(client, keys.user(USER).all_pattern())
        store_older(module, connector, keys, docs)
        tracemalloc.start()
        module.BM25Index(connector, keys, "turn").upgrade(USER)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"  peak Python memory of the upgrade (tracemalloc, second pass): {peak / 2**20:.1f} MiB")
    finally:
        drop(client, f"{prefix}:*")
        connector.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--compare", help="a git revision whose bm25_index.py upgrades first")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args(argv)
    docs = turns(args.docs)
    n_terms = sum(len(older_tokenize(t)) for _, t in docs)
    print(f"{len(docs):,} turns, {n_terms / len(docs):.1f} index terms per turn (mean)")
    if args.compare:
        run(args.compare, load_revision(args.compare), args.redis_url, docs)
    run("working tree", bm25_index, args.redis_url, docs)


if __name__ == "__main__":
    main()
