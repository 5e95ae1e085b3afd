"""Search latency, ingestion throughput, memory and HNSW recall at 10k / 100k episodes.

Usage (from the repository root; needs a Redis, default ``redis://127.0.0.1:6379/0``)::

    .venv/bin/python benchmarks/recall.py --sizes 10000,100000 --ingest-sample 5000

For every size it builds a synthetic corpus (``benchmarks/corpus.py``) under a throw-away
key prefix, then prints, and writes to ``benchmarks/results/recall-<size>.md``:

* corpus load: the first ``--ingest-sample`` episodes (ready ``Episode`` records, so no
  summarising and no save heuristics) go through ``MemoryCoordinator.ingest`` (NER → distil →
  real ONNX embedding → Redis + indexes → entity graph) in batches. Ingestion as a user's
  session goes (turns → session end → searchable) is ``benchmarks/ingest.py``. The rest of the
  corpus goes through the same ``run_ingestion``
  steps with the embed step replaced by a lookup in an embedding cache (kept under
  ``--cache-dir``, keyed by text and model, so a rerun does not embed 100k texts again);
* p50/p99 of ``GET /api/memory/search`` in-process (httpx ``ASGITransport``: the whole FastAPI
  stack, worker-thread hop included, without a socket; embedding of the query included: the
  query cache is switched off) per mode, the same calls on the coordinator without HTTP, and
  where the time goes (instrumented pass). Starlette's ``TestClient`` adds a portal thread of
  its own (about 4 ms more per call on this machine), which a served app does not have;
* brute-force numpy cosine vs the HNSW index on the same query vectors: latency, ratio and
  recall@10 (and @40, the candidate pool hybrid search asks for);
* hit@10 of each mode: how often the query's known target episode is in the top 10;
* process RSS and the Redis memory the corpus takes: ``MEMORY USAGE key SAMPLES 0`` (exact)
  summed over every key of the corpus, per episode.

Every key written is deleted at the end (also on Ctrl-C). Not a test.
"""

# ruff: noqa: E402 - environment first: Prefect reads PREFECT_HOME when agtos.flows is imported

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

BENCH_TMP = Path(os.environ.get("AGTOS_BENCH_TMP", "/tmp/agtos-bench"))
BENCH_TMP.mkdir(parents=True, exist_ok=True)
RUN_TMP = Path(tempfile.mkdtemp(prefix="run-", dir=BENCH_TMP))
atexit.register(shutil.rmtree, RUN_TMP, True)  # also on --help and errors
os.environ.setdefault("PREFECT_HOME", str(RUN_TMP / "prefect"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script or with -m

# tokenizers (imported by agtos.providers.embeddings) must be loaded before usearch:
# importing usearch and then onnxruntime without it segfaults in this environment.
import agtos.providers.embeddings  # noqa: F401, I001

import argparse
import asyncio
import cProfile
import gc
import hashlib
import io
import json
import platform
import pstats
import resource
import signal
import statistics
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import httpx
import psutil
import redis
import redis.utils
import usearch
from fastapi import FastAPI

import agtos.memory.semantic as semantic_module
from agtos.config import EmbeddingConfig, Settings
from agtos.memory.ingestion_pipeline import INLINE_STEPS, run_ingestion
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Episode, IngestItem
from agtos.serving.app import create_app
from agtos.tasks.text import episode_text
from benchmarks.stamp import Stamp
from benchmarks.corpus import GENERATOR_VERSION, USER_ID, Query, make_episode, make_queries, warmup_queries

MODES = ("hybrid", "vector", "bm25")
KINDS = ("paraphrase", "literal", "exact")
TARGETS = {"p50_ms": 15.0, "p99_ms": 50.0, "ingest_eps": 200.0, "recall10": 0.95}
EF_SWEEP = (32, 64, 128, 256)  # HNSW expansion_search values swept against exact search
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(samples: Sequence[float], q: float) -> float:
    """Percentile of seconds, in ms."""
    return float(np.percentile(np.asarray(samples, dtype=np.float64), q) * 1e3) if samples else float("nan")


# -- embedding cache ------------------------------------------------------------------------
class EmbeddingCache:
    """sha1(text) -> float32 vector, in append-only ``chunk-*.npz`` files of one folder per model."""

    FLUSH_EVERY = 8192

    def __init__(self, folder: Path, dim: int) -> None:
        self.folder = folder
        self.dim = dim
        folder.mkdir(parents=True, exist_ok=True)
        self.blocks: list[np.ndarray] = []
        self.where: dict[bytes, tuple[int, int]] = {}
        self._pending: dict[bytes, np.ndarray] = {}
        for path in sorted(folder.glob("chunk-*.npz")):
            try:
                with np.load(path) as data:
                    keys, vecs = data["keys"], data["vecs"].astype(np.float32)
            except (OSError, ValueError, KeyError) as exc:
                log(f"ignoring unreadable cache chunk {path}: {exc}")
                continue
            if vecs.ndim != 2 or vecs.shape[1] != dim or len(keys) != len(vecs):
                log(f"ignoring cache chunk {path}: shape {vecs.shape}")
                continue
            if keys.dtype.kind == "S":  # older chunks: numpy "S" strips trailing NUL bytes
                key_list = [bytes(k).ljust(20, b"\0") for k in keys]
            else:
                key_list = [bytes(row) for row in np.asarray(keys, dtype=np.uint8)]
            self._add_block(key_list, vecs)

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha1(text.encode()).digest()

    def __len__(self) -> int:
        return len(self.where) + len(self._pending)

    def _add_block(self, keys: list[bytes], vecs: np.ndarray) -> None:
        block = len(self.blocks)
        self.blocks.append(vecs)
        for row, k in enumerate(keys):
            self.where.setdefault(k, (block, row))

    def missing(self, texts: Sequence[str]) -> list[str]:
        seen: set[bytes] = set()
        out = []
        for text in texts:
            k = self.key(text)
            if k not in self.where and k not in self._pending and k not in seen:
                seen.add(k)
                out.append(text)
        return out

    def add(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        for text, vec in zip(texts, vecs, strict=True):
            k = self.key(text)
            if k not in self.where:
                self._pending[k] = np.array(vec, dtype=np.float32)
        if len(self._pending) >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        keys = list(self._pending)
        vecs = np.stack([self._pending[k] for k in keys]).astype(np.float32)
        name = f"chunk-{time.time_ns()}-{os.getpid()}"
        tmp = self.folder / f"{name}.tmp"
        with tmp.open("wb") as handle:
            raw = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 20)
            np.savez(handle, keys=raw, vecs=vecs)
        tmp.rename(self.folder / f"{name}.npz")
        self._pending.clear()
        self._add_block(keys, vecs)

    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            k = self.key(text)
            pending = self._pending.get(k)
            if pending is not None:
                out[i] = pending
                continue
            block, row = self.where[k]  # KeyError: the caller forgot to fill the cache
            out[i] = self.blocks[block][row]
        return out

    def lookup_or_synthetic(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Cached vectors, and for texts never embedded a deterministic stand-in: a cached real
        vector (chosen by the text's hash) plus Gaussian noise (cosine ≈ 0.9 to it), renormalised.
        Returns the matrix and how many rows are synthetic."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        n_synthetic = 0
        for i, text in enumerate(texts):
            k = self.key(text)
            if k in self.where or k in self._pending:
                out[i] = self.lookup([text])[0]
                continue
            rng = np.random.default_rng(int.from_bytes(k[:8], "little"))
            block = self.blocks[int(rng.integers(len(self.blocks)))]
            base = block[int(rng.integers(len(block)))]
            vec = base + rng.normal(0.0, 0.48 / np.sqrt(self.dim), self.dim).astype(np.float32)
            out[i] = vec / np.linalg.norm(vec)
            n_synthetic += 1
        return out, n_synthetic


# -- small helpers ------------------------------------------------------------------------------
class Stopwatch:
    """Seconds per named stage, *exclusive*: time spent in a nested wrapped call counts for the
    inner stage only (per thread), so stages never overlap and, for calls made one after another,
    stages + "other" = the measured total with no stage below zero. Wall and process CPU apart."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.texts = 0  # texts passed to the ingestion embed step
        self._local = threading.local()

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack: list[list[float]] = self._local.__dict__.setdefault("stack", [])
            stack.append([0.0, 0.0])  # wall and CPU of nested stages
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall, cpu = time.perf_counter() - t, time.process_time() - c
                nested_wall, nested_cpu = stack.pop()
                self.current[name] += wall - nested_wall
                self.cpu[name] += cpu - nested_cpu
                if stack:
                    stack[-1][0] += wall
                    stack[-1][1] += cpu

        timed.stage = name  # type: ignore[attr-defined]
        return timed

    def take(self) -> dict[str, float]:
        out, self.current = dict(self.current), defaultdict(float)
        return out

    def take_cpu(self) -> dict[str, float]:
        out, self.cpu = dict(self.cpu), defaultdict(float)
        return out


#: the search breakdown's stage of the query's embedding, on a pool thread beside the calling thread's stages
QUERY_EMBEDDING = "query embedding (own thread, beside the stages)"
#: the calling thread's wait for that embedding (its part not hidden behind the other stages)
EMBEDDING_WAIT = "waiting for the query vector"


def wait(future: Future[Any]) -> Any:
    """The result of ``future`` (the call the breakdown times as :data:`EMBEDDING_WAIT`)."""
    return future.result()


class TimedWaits:
    """An executor whose futures' ``result()`` goes through ``timed_wait`` (the rest passed through)."""

    def __init__(self, executor: Any, timed_wait: Callable[[Future[Any]], Any]) -> None:
        self.executor, self.timed_wait = executor, timed_wait
        self.stage = EMBEDDING_WAIT  # the breakdown's column

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return TimedFuture(self.executor.submit(fn, *args, **kwargs), self.timed_wait)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executor, name)


class TimedFuture:
    """A future whose ``result()`` is timed (see :class:`TimedWaits`)."""

    def __init__(self, future: Future[Any], timed_wait: Callable[[Future[Any]], Any]) -> None:
        self.future, self.timed_wait = future, timed_wait

    def result(self, timeout: float | None = None) -> Any:
        return self.timed_wait(self.future) if timeout is None else self.future.result(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.future, name)


class AsgiClient:
    """Blocking GETs against an ASGI app in this process (httpx ``ASGITransport``, no socket).

    The event loop runs in its own thread under one long-lived task, as under uvicorn, so anyio
    keeps its worker threads between requests. (Driving the loop with ``run_until_complete`` per
    request makes each request its root task: anyio then stops its workers after every request
    and starts a new thread, ~0.5 ms, for each sync endpoint call.)
    """

    def __init__(self, app: FastAPI) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")
        self._stop: asyncio.Future[None] | None = None
        ready = threading.Event()

        async def idle() -> None:
            self._stop = self.loop.create_future()
            ready.set()
            await self._stop

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(idle(),), daemon=True)
        self.thread.start()
        ready.wait()

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return asyncio.run_coroutine_threadsafe(self.client.get(path, **kwargs), self.loop).result()

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return asyncio.run_coroutine_threadsafe(self.client.post(path, **kwargs), self.loop).result()

    def __enter__(self) -> AsgiClient:
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self.loop).result()
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set_result, None)
        self.thread.join()
        self.loop.close()


@contextmanager
def patched(obj: Any, **attrs: Any) -> Iterator[None]:
    """Set instance attributes for the duration (shadowing methods), then remove them again."""
    saved = {name: obj.__dict__[name] for name in attrs if name in obj.__dict__}
    for name, value in attrs.items():
        setattr(obj, name, value)
    try:
        yield
    finally:
        for name in attrs:
            if name in saved:
                setattr(obj, name, saved[name])
            else:
                delattr(obj, name)


@contextmanager
def patched_module(module: Any, **attrs: Any) -> Iterator[None]:
    """Set module globals for the duration, then restore them."""
    saved = {name: getattr(module, name) for name in attrs}
    for name, value in attrs.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


@contextmanager
def timed_default_steps(watch: Stopwatch) -> Iterator[None]:
    """Time every step of the steps ``coordinator.ingest`` uses (run_ingestion's default argument)."""
    defaults = run_ingestion.__defaults__
    if defaults != (INLINE_STEPS,):  # the signature changed: time the whole call only
        yield
        return
    wrapped = {f.name: watch.wrap(f.name, getattr(INLINE_STEPS, f.name)) for f in fields(INLINE_STEPS)}
    if "embed" in wrapped:
        embed_step = wrapped["embed"]

        def counting_embed(rt: Any, texts: list[str]) -> Any:
            watch.texts += len(texts)
            return embed_step(rt, texts)

        wrapped["embed"] = counting_embed
    timed = replace(INLINE_STEPS, **wrapped)
    run_ingestion.__defaults__ = (timed,)
    try:
        yield
    finally:
        run_ingestion.__defaults__ = defaults


def fmt_s(stages: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}s" for k, v in stages.items())


def fmt_bulk(res: SizeResult) -> str:
    skipped = res.figures.get("bulk_skipped")
    return f"{' and '.join(skipped)} off" if skipped else "every step"


def source_fingerprint() -> str:
    """Git commit plus a hash of the agtos sources as they are on disk (the tree may be dirty)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1()
    for path in sorted((root / "agtos").rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = "unknown"
    return f"commit {head[:10]}, agtos/*.py sha1 {digest.hexdigest()[:12]} (working tree as loaded)"


def delete_prefix(client: redis.Redis, prefix: str) -> int:
    """SCAN + UNLINK every key under ``prefix:`` (repeated until none is left)."""
    removed = 0
    for _ in range(5):
        batch: list[bytes] = []
        found = 0
        for key in client.scan_iter(match=f"{prefix}:*", count=2000):
            batch.append(key)
            found += 1
            if len(batch) >= 1000:
                removed += client.unlink(*batch)
                batch = []
        if batch:
            removed += client.unlink(*batch)
        if not found:
            break
    return removed


def prefix_memory(client: redis.Redis, prefix: str) -> tuple[int, int]:
    """(number of keys, sum of ``MEMORY USAGE key SAMPLES 0``) under ``prefix:``: every key, each
    counted exactly (SAMPLES 0 walks all elements of hashes, sets and sorted sets; the default
    estimates them from 5)."""
    keys = total = 0
    batch: list[bytes] = []

    def flush() -> int:
        pipe = client.pipeline(transaction=False)
        for key in batch:
            pipe.memory_usage(key, samples=0)
        return sum(int(n or 0) for n in pipe.execute())

    for key in client.scan_iter(match=f"{prefix}:*", count=2000):
        batch.append(key)
        keys += 1
        if len(batch) >= 1000:
            total += flush()
            batch = []
    if batch:
        total += flush()
    return keys, total


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def texts_of(episodes: Sequence[Episode]) -> list[str]:
    """What ingestion embeds for these episodes: their text, and their facts (as memories)."""
    out = [episode_text(e) for e in episodes]
    for e in episodes:
        out.extend(e.facts)
    return out


# -- the benchmark for one corpus size -----------------------------------------------------------
@dataclass
class SizeResult:
    size: int
    figures: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    hits: dict[str, dict[str, float]] = field(default_factory=dict)
    breakdown: dict[str, dict[str, float]] = field(default_factory=dict)
    vector: dict[str, float] = field(default_factory=dict)
    profile: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.raw = redis.Redis.from_url(args.redis_url)
        self.raw.ping()
        self.prefixes: list[str] = []
        self.cache: EmbeddingCache | None = None

    def cleanup(self) -> None:
        for prefix in self.prefixes:
            n = delete_prefix(self.raw, prefix)
            log(f"deleted {n} keys under {prefix}:")
        self.prefixes.clear()
        if self.cache is not None:
            self.cache.flush()

    # ---- phases ----
    def run_size(self, n: int) -> SizeResult:
        args = self.args
        res = SizeResult(n)
        prefix = f"agtos-bench-{uuid.uuid4().hex[:10]}"
        self.prefixes.append(prefix)
        settings = Settings(
            redis_url=args.redis_url,
            key_prefix=prefix,
            data_dir=RUN_TMP / "data",
            config_dir=RUN_TMP / "config",
            hnsw_build_threads=args.hnsw_threads,
            embedding=EmbeddingConfig(quantize=args.quantize),
        )
        gc.collect()
        redis_before = int(self.raw.info("memory")["used_memory"])
        coord = MemoryCoordinator(settings)
        try:
            embedder = coord.semantic.embedder
            if hasattr(embedder, "load"):
                embedder.load()
            embedder.embed(["warm-up: load the model"])
            recognizer = getattr(coord, "recognizer", None)
            if recognizer is not None and hasattr(recognizer, "recognize_many"):
                recognizer.recognize_many(["Warm-up: Mia met Omar in Lisbon on Friday."])  # loads spaCy
            model_tag = f"{embedder.name}-{getattr(embedder, 'expected_sha256', embedder.model)[:12]}"
            model_tag += "-int8" if args.quantize else ""  # its vectors differ: a cache of their own
            if self.cache is None:
                self.cache = EmbeddingCache(args.cache_dir / f"embeddings-{model_tag}", embedder.dim)
                log(f"embedding cache {self.cache.folder}: {len(self.cache)} vectors")
            res.figures["embedder"] = f"{embedder.name} {embedder.model}"
            self.ingest(coord, n, res)
            self.load_shard(coord, n, res)
            res.figures["redis_used_delta"] = int(self.raw.info("memory")["used_memory"]) - redis_before
            keys, mem = prefix_memory(self.raw, prefix)
            res.figures["redis_keys"], res.figures["redis_key_bytes"] = keys, mem
            res.figures["rss_loaded_mib"] = rss_mib()
            queries = make_queries(args.seed, min(n, args.real_vectors), args.queries // 3)
            res.figures["queries"] = Counter(q.kind for q in queries)
            self.search(coord, queries, res)
            self.breakdown(coord, queries, res)
            self.vector_baseline(coord, n, queries, res)
            if args.profile:
                res.profile = self.profile(coord, queries)
            res.figures["rss_end_mib"] = rss_mib()
            res.figures["peak_rss_mib"] = peak_rss_mib()
        finally:
            coord.close()
            n_deleted = delete_prefix(self.raw, prefix)
            self.prefixes.remove(prefix)
            log(f"deleted {n_deleted} keys under {prefix}:")
            del coord
            gc.collect()
        return res

    def ingest(self, coord: MemoryCoordinator, n: int, res: SizeResult) -> None:
        args, cache = self.args, self.cache
        assert cache is not None
        sample = min(args.ingest_sample, n)
        embedder = coord.semantic.embedder
        watch = Stopwatch()
        texts_embedded = 0
        orig_embed = embedder.embed

        def embed(texts: list[str]) -> np.ndarray:
            nonlocal texts_embedded
            out = orig_embed(texts)
            texts_embedded += len(texts)
            cache.add(texts, out)  # reused by later sizes and reruns (not much time, but outside run)
            return out

        total = 0.0
        log(f"n={n:,}: ingesting {sample:,} episodes through coordinator.ingest (batch {args.batch})")
        with patched(embedder, embed=embed), timed_default_steps(watch):
            for start in range(0, sample, args.batch):
                episodes = [make_episode(args.seed, i) for i in range(start, min(sample, start + args.batch))]
                items = [IngestItem(user_id=USER_ID, session_id=e.session_id, episode=e) for e in episodes]
                t = time.perf_counter()
                report = coord.ingest(items)
                total += time.perf_counter() - t
                if report.stored != len(episodes) or report.degraded:
                    raise RuntimeError(f"ingestion stored {report.stored}/{len(episodes)}: {report.degraded}")
        stages = watch.take()
        res.figures.update(
            ingest_sample=sample,
            ingest_s=total,
            ingest_eps=sample / total if total else float("nan"),
            ingest_steps=stages,
            ingest_texts=texts_embedded,
            ingest_step_texts=watch.texts,
        )
        log(f"  {res.figures['ingest_eps']:.1f} episodes/s ({texts_embedded} texts embedded, steps {fmt_s(stages)})")
        if sample >= n:
            res.figures["bulk_n"] = 0
            return
        self.fill_cache(coord, sample, min(n, args.real_vectors))
        res.figures["real_vectors"] = min(n, args.real_vectors)
        synthetic = 0

        def bulk_embed(_rt: Any, texts: list[str]) -> np.ndarray:
            nonlocal synthetic
            vecs, made = cache.lookup_or_synthetic(texts)
            synthetic += made
            return vecs

        bulk = replace(INLINE_STEPS, embed=bulk_embed)
        bulk = replace(bulk, **{f.name: watch.wrap(f.name, getattr(bulk, f.name)) for f in fields(bulk)})
        # Without --bulk-with-entities the coordinator has no recognizer during the bulk load, so the
        # NER and entity-graph steps do nothing (derived data that episode search does not read).
        no_ner = {} if args.bulk_with_entities else {"recognizer": None}
        res.figures["bulk_skipped"] = [] if args.bulk_with_entities else ["NER", "entity graph"]
        log(f"  loading episodes {sample:,}..{n:,} with cached vectors (run_ingestion, {fmt_bulk(res)})")
        total = 0.0

        def cached_embed(texts: list[str]) -> np.ndarray:  # entity names when --bulk-with-entities
            todo = cache.missing(texts)
            if todo:
                cache.add(todo, orig_embed(todo))
            return cache.lookup(texts)

        with patched(embedder, embed=cached_embed), patched(coord, **no_ner):
            for start in range(sample, n, args.batch):
                episodes = [make_episode(args.seed, i) for i in range(start, min(n, start + args.batch))]
                items = [IngestItem(user_id=USER_ID, session_id=e.session_id, episode=e) for e in episodes]
                t = time.perf_counter()
                report = run_ingestion(coord.services, items, bulk)
                total += time.perf_counter() - t
                if report.stored != len(episodes):
                    raise RuntimeError(f"bulk load stored {report.stored}/{len(episodes)}")
                done = start + len(episodes)
                if (start - sample) // args.batch % 40 == 39:
                    log(f"    {done:,}/{n:,} ({(done - sample) / total:.0f}/s)")
        stages = watch.take()
        res.figures.update(
            bulk_n=n - sample, bulk_s=total, bulk_eps=(n - sample) / total, bulk_steps=stages, synthetic=synthetic
        )
        log(f"  bulk: {(n - sample) / total:.0f} episodes/s, steps {fmt_s(stages)}")

    def fill_cache(self, coord: MemoryCoordinator, lo: int, hi: int) -> None:
        """Embed (once, cached on disk) every text of episodes lo..hi not in the cache yet."""
        cache = self.cache
        assert cache is not None
        missing: list[str] = []
        for start in range(lo, hi, 5000):
            episodes = [make_episode(self.args.seed, i) for i in range(start, min(hi, start + 5000))]
            missing += cache.missing(texts_of(episodes))
        missing = list(dict.fromkeys(missing))
        if not missing:
            log("  every remaining vector is in the embedding cache")
            return
        log(f"  embedding {len(missing):,} texts for the cache (once; not part of any figure)")
        embedder = coord.semantic.embedder
        t0 = time.perf_counter()
        chunk = 4  # small calls: on a busy 2-core host, padded batches of 64 ran several times slower per text
        for start in range(0, len(missing), chunk):
            part = missing[start : start + chunk]
            cache.add(part, embedder.embed(part))
            done = start + len(part)
            if done % 2048 == 0 or done == len(missing):
                rate = done / (time.perf_counter() - t0)
                eta = (len(missing) - done) / rate
                log(f"    {done:,}/{len(missing):,} texts, {rate:.0f}/s, ETA {eta:.0f}s")
        cache.flush()

    def load_shard(self, coord: MemoryCoordinator, n: int, res: SizeResult) -> None:
        """First search: the process mirrors the vectors from Redis and builds the HNSW graph."""
        vectors = coord.semantic.store("episode").vectors
        probe = coord.semantic.embedder.embed(["probe query"])[0]
        t = time.perf_counter()
        vectors.search(USER_ID, probe, 10)
        res.figures["shard_load_s"] = time.perf_counter() - t
        log(f"  shard loaded from Redis in {res.figures['shard_load_s']:.1f}s; waiting for the HNSW build")
        t = time.perf_counter()
        if not vectors.wait_for_builds(USER_ID, timeout_s=self.args.build_timeout):
            raise RuntimeError("HNSW build did not finish in time")
        res.figures["hnsw_build_s"] = time.perf_counter() - t
        stats = vectors.stats()
        res.figures["vector_stats"] = stats
        if stats["docs"] != n:
            raise RuntimeError(f"unexpected vector index state: {stats}")
        res.figures["has_graph"] = stats["hnswUsers"] == 1
        if res.figures["has_graph"]:
            log(f"  HNSW graph built in {res.figures['hnsw_build_s']:.1f}s")
        else:
            log(f"  no HNSW graph: {n} < hnsw_min_size {stats['params']['hnswMinSize']}, searches are exact")

    def search(self, coord: MemoryCoordinator, queries: list[Query], res: SizeResult) -> None:
        """Timed passes: HTTP in-process and direct coordinator call, interleaved per query."""
        embedder = coord.semantic.embedder
        cache = getattr(embedder, "cache", None)
        if cache is not None:
            cache.size = 0  # every query is embedded (no LRU hits)
        headers = {"X-User-Id": USER_ID}
        http: dict[str, list[float]] = {m: [] for m in MODES}
        direct: dict[str, list[float]] = {m: [] for m in MODES}
        found: dict[str, Counter[str]] = {m: Counter() for m in MODES}
        with AsgiClient(create_app(coordinator=coord)) as client:
            for text in warmup_queries(self.args.warmup):
                for mode in MODES:
                    client.get("/api/memory/search", params={"q": text, "mode": mode, "limit": 10}, headers=headers)
                    coord.search_episodes(USER_ID, text, 10, mode)
            log(f"  timing {len(queries)} queries × {len(MODES)} modes (HTTP and direct)")
            for q in queries:
                for mode in MODES:
                    params = {"q": q.text, "mode": mode, "limit": 10}
                    t = time.perf_counter()
                    response = client.get("/api/memory/search", params=params, headers=headers)
                    http[mode].append(time.perf_counter() - t)
                    if response.status_code != 200:
                        raise RuntimeError(f"search answered {response.status_code}: {response.text[:200]}")
                    if q.target_id in [hit["id"] for hit in response.json()["results"]]:
                        found[mode][q.kind] += 1
                    t = time.perf_counter()
                    coord.search_episodes(USER_ID, q.text, 10, mode)
                    direct[mode].append(time.perf_counter() - t)
        per_kind = Counter(q.kind for q in queries)
        for mode in MODES:
            res.latency[mode] = {
                "http_p50": pct(http[mode], 50),
                "http_p99": pct(http[mode], 99),
                "http_mean": statistics.fmean(http[mode]) * 1e3,
                "direct_p50": pct(direct[mode], 50),
                "direct_p99": pct(direct[mode], 99),
                "direct_mean": statistics.fmean(direct[mode]) * 1e3,
            }
            res.hits[mode] = {k: found[mode][k] / per_kind[k] for k in KINDS if per_kind[k]}
            res.hits[mode]["all"] = sum(found[mode].values()) / len(queries)
            lat = res.latency[mode]
            log(f"    {mode:6s} HTTP p50 {lat['http_p50']:.1f} p99 {lat['http_p99']:.1f} ms")
            log(f"           hit@10 {res.hits[mode]}")

    def breakdown(self, coord: MemoryCoordinator, queries: list[Query], res: SizeResult) -> None:
        """Where a direct search spends its time: the calling thread's stages (exclusive times of the
        library's own methods, one after another, the wait for the query's vector among them) plus
        "other" add up to the total, "other" never below zero. The query embedding itself runs on a
        pool thread beside those stages (:data:`QUERY_EMBEDDING`): shown apart, not in the sum. The
        timed pass's total is shown beside it."""
        sem = coord.semantic
        store = sem.store("episode")
        embedder = sem.embedder
        watch = Stopwatch()
        version_check = "version checks (Redis)"
        waits = watch.wrap(EMBEDDING_WAIT, wait)
        wrappers: list[tuple[Any, dict[str, Any]]] = [
            (embedder, {"embed_one": watch.wrap(QUERY_EMBEDDING, embedder.embed_one)}),
            (semantic_module, {"_EMBEDDINGS": TimedWaits(semantic_module._EMBEDDINGS, waits)}),
            (store.vectors, {"search": watch.wrap("HNSW search + re-scoring", store.vectors.search)}),
            (semantic_module, {"sync_with_reads": watch.wrap(version_check, semantic_module.sync_with_reads)}),
            (store.bm25, {"search": watch.wrap("BM25 scoring (mirror)", store.bm25.search)}),
            (
                semantic_module,
                {"live_and_linked": watch.wrap("liveness + records (Redis)", semantic_module.live_and_linked)},
            ),
            (sem, {"records": watch.wrap("records fetch (Redis)", sem.records)}),
        ]
        per_mode: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        with ExitStack() as stack:
            for obj, attrs in wrappers:
                stack.enter_context(patched(obj, **attrs))
            for q in queries:
                for mode in MODES:
                    t = time.perf_counter()
                    coord.search_episodes(USER_ID, q.text, 10, mode)
                    total = time.perf_counter() - t
                    stages = watch.take()
                    stages["total"] = total
                    per_mode[mode].append(stages)
        names = list(dict.fromkeys(fn.stage for _, attrs in wrappers for fn in attrs.values()))
        for mode, rows in per_mode.items():

            def mean(name: str, rows: list[dict[str, float]] = rows) -> float:
                return statistics.fmean(r.get(name, 0.0) for r in rows) * 1e3

            out = {name: mean(name) for name in names}
            beside = sum(v for k, v in out.items() if k != QUERY_EMBEDDING)
            out["other (RRF, recency re-rank, JSON, glue)"] = mean("total") - beside
            out["total"] = mean("total")
            out["timed pass total (direct mean)"] = res.latency[mode]["direct_mean"]
            res.breakdown[mode] = out

    def vector_baseline(self, coord: MemoryCoordinator, n: int, queries: list[Query], res: SizeResult) -> None:
        """Brute-force numpy cosine vs HNSW on the same query vectors; recall of HNSW vs exact."""
        cache = self.cache
        assert cache is not None
        vectors = coord.semantic.store("episode").vectors
        ids, rows = [], []
        for start in range(0, n, 10_000):
            episodes = [make_episode(self.args.seed, i) for i in range(start, min(n, start + 10_000))]
            ids += [e.id for e in episodes]
            rows.append(cache.lookup_or_synthetic([episode_text(e) for e in episodes])[0])
        matrix = np.concatenate(rows)
        del rows
        qvecs = coord.semantic.embedder.embed([q.text for q in queries])
        shard = vectors._shards.get(USER_ID)
        t_np, t_hnsw, t_search, t_exact = [], [], [], []
        recall10 = recall40 = agree = 0.0
        exact_sets: list[set[str]] = []
        for v in qvecs:
            t = time.perf_counter()
            sims = matrix @ v
            top = np.argpartition(-sims, 10)[:10]
            top = top[np.argsort(-sims[top])]
            t_np.append(time.perf_counter() - t)
            with shard.lock:
                t = time.perf_counter()
                shard.search(v, 10)  # the graph when there is one (else exact)
                t_hnsw.append(time.perf_counter() - t)
            t = time.perf_counter()
            approx = vectors.search(USER_ID, v, 10, min_similarity=-1.0)
            t_search.append(time.perf_counter() - t)
            t = time.perf_counter()
            exact = vectors.exact_search(USER_ID, v, 10, min_similarity=-1.0)
            t_exact.append(time.perf_counter() - t)
            exact_ids = {d for d, _ in exact}
            exact_sets.append(exact_ids)
            recall10 += len({d for d, _ in approx} & exact_ids) / 10
            agree += len({ids[i] for i in top} & exact_ids) / 10
            approx40 = vectors.search(USER_ID, v, 40, min_similarity=-1.0)
            exact40 = vectors.exact_search(USER_ID, v, 40, min_similarity=-1.0)
            recall40 += len({d for d, _ in approx40} & {d for d, _ in exact40}) / 40
        nq = len(qvecs)
        res.vector = {
            "numpy_p50": pct(t_np, 50),
            "numpy_p99": pct(t_np, 99),
            "hnsw_p50": pct(t_hnsw, 50),
            "hnsw_p99": pct(t_hnsw, 99),
            "index_search_p50": pct(t_search, 50),
            "index_search_p99": pct(t_search, 99),
            "index_exact_p50": pct(t_exact, 50),
            "index_exact_p99": pct(t_exact, 99),
            "recall10": recall10 / nq,
            "recall40": recall40 / nq,
            "numpy_vs_index_exact": agree / nq,
            "ef_sweep": ef_sweep(shard, qvecs, exact_sets),
        }
        log(f"  recall@10 {recall10 / nq:.4f}  recall@40 {recall40 / nq:.4f}")

    def profile(self, coord: MemoryCoordinator, queries: list[Query]) -> str:
        """cProfile of the direct hybrid searches: the top functions by cumulative time."""
        profiler = cProfile.Profile()
        profiler.enable()
        for q in queries:
            coord.search_episodes(USER_ID, q.text, 10, "hybrid")
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        return out.getvalue()


# -- report ---------------------------------------------------------------------------------------
def ef_sweep(shard: Any, qvecs: np.ndarray, exact_sets: list[set[str]]) -> list[dict[str, float]]:
    """Graph search latency and recall@10 for several ``expansion_search`` values (the default restored)."""
    if shard.hnsw is None:
        return []
    rows, default = [], shard.hnsw.expansion_search
    try:
        for ef in EF_SWEEP:
            shard.hnsw.expansion_search = ef
            times, hits = [], 0.0
            for v, exact_ids in zip(qvecs, exact_sets, strict=True):
                with shard.lock:
                    t = time.perf_counter()
                    found = shard.search(v, 10)
                    times.append(time.perf_counter() - t)
                hits += len({d for d, _ in found} & exact_ids) / 10
            rows.append({"ef": ef, "p50": pct(times, 50), "p99": pct(times, 99), "recall10": hits / len(qvecs)})
    finally:
        shard.hnsw.expansion_search = default
    return rows


def summary(res: SizeResult) -> dict[str, Any]:
    """The figures the suite's one table shows (``recall-<size>.json``)."""
    f = res.figures
    return {
        "size": res.size,
        "latency": res.latency,
        "vector": res.vector,
        "hits": res.hits,
        "ingest_eps": f.get("ingest_eps"),
        "bulk_eps": f.get("bulk_eps"),
        "synthetic": f.get("synthetic", 0),
        "redis_bytes_per_episode": f["redis_key_bytes"] / res.size,
        "rss_loaded_mib": f.get("rss_loaded_mib"),
        "peak_rss_mib": f.get("peak_rss_mib"),
        "hnsw_build_s": f.get("hnsw_build_s"),
        "shard_load_s": f.get("shard_load_s"),
        "breakdown": res.breakdown,
    }


def ok(value: float, target: float, higher_is_better: bool) -> str:
    good = value >= target if higher_is_better else value <= target
    return "yes" if good else "**no**"


def render_ef_sweep(rows: list[dict[str, float]]) -> list[str]:
    """Markdown lines of the expansion_search sweep (none without a graph)."""
    if not rows:
        return []
    lines = [
        "| HNSW expansion_search | graph search p50 (ms) | p99 (ms) | recall@10 vs exact |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {r['ef']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['recall10']:.4f} |" for r in rows]
    return [*lines, ""]


def render(res: SizeResult, command: str, env: dict[str, str]) -> str:
    f, v = res.figures, res.vector
    n = res.size
    lines = [f"## agtos recall benchmark: {n:,} episodes", ""]
    lines += [f"- {k}: {val}" for k, val in env.items()]
    lines += [f"- embedder: {f['embedder']}; queries: {dict(f['queries'])} (distinct, query cache off)", ""]
    h = res.latency["hybrid"]
    lines += [
        "### Targets",
        "",
        "| target | measured | goal | met |",
        "|---|---:|---:|---|",
        f"| search p50, HTTP in-process, hybrid (default mode) | {h['http_p50']:.1f} ms | "
        f"< {TARGETS['p50_ms']:.0f} ms | {ok(h['http_p50'], TARGETS['p50_ms'], False)} |",
        f"| search p99, HTTP in-process, hybrid | {h['http_p99']:.1f} ms | < {TARGETS['p99_ms']:.0f} ms | "
        f"{ok(h['http_p99'], TARGETS['p99_ms'], False)} |",
        f"| corpus load of ready episodes, batched, embedding included | {f['ingest_eps']:.0f} episodes/s | "
        f"≥ {TARGETS['ingest_eps']:.0f} | "
        + (ok(f["ingest_eps"], TARGETS["ingest_eps"], True) if f["ingest_sample"] else "not measured")
        + " |",
        f"| HNSW recall@10 vs exact | {v['recall10']:.4f} | ≥ {TARGETS['recall10']} | "
        f"{ok(v['recall10'], TARGETS['recall10'], True)} |",
        "",
        "### Search latency per mode (ms; embedding of the query included)",
        "",
        "| mode | HTTP p50 | HTTP p99 | direct p50 | direct p99 | HTTP overhead (p50) | "
        "hit@10 all | paraphrase | literal | exact token |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        lat, hit = res.latency[mode], res.hits[mode]
        lines.append(
            f"| {mode} | {lat['http_p50']:.1f} | {lat['http_p99']:.1f} | {lat['direct_p50']:.1f} | "
            f"{lat['direct_p99']:.1f} | {lat['http_p50'] - lat['direct_p50']:+.1f} | {hit['all']:.2f} | "
            + " | ".join(f"{hit.get(k, float('nan')):.2f}" for k in KINDS)
            + " |"
        )
    stages = list(next(iter(res.breakdown.values())))
    lines += [
        "",
        "### Where a direct search spends its time (mean ms per query, instrumented pass)",
        "",
        "Each stage is the exclusive time of the library's own methods, run one after another on the "
        "calling thread (the wait for the query's vector; `sync_with_reads`, the one Redis version check of "
        "every mirror the search reads and any re-read of changes; the rest of `VectorIndex.search`, graph "
        "search + re-scoring; the "
        "rest of `BM25Index.search`, scoring on the in-process mirror; `live_many`, every hit's records in one "
        "round trip; "
        "`SemanticMemory.records`), *other* is the remainder, and the stages + other = the total. "
        "The query's embedding (`embed_one`) runs on a pool thread meanwhile: its column is apart, not in the sum. "
        "The timed pass's total is shown beside it.",
        "",
        "| mode | " + " | ".join(stages) + " |",
        "|---|" + "---:|" * len(stages),
    ]
    for mode in MODES:
        lines.append(f"| {mode} | " + " | ".join(f"{res.breakdown[mode][s]:.2f}" for s in stages) + " |")
    stats = f["vector_stats"]
    p = stats["params"]
    lines += [
        "",
        "### Vector search: HNSW vs brute-force cosine (same query vectors, top 10, ms)",
        "",
        "| search | p50 | p99 |",
        "|---|---:|---:|",
        f"| numpy brute force (`matrix @ q` + argpartition, {n:,}×384 float32) | {v['numpy_p50']:.2f} | "
        f"{v['numpy_p99']:.2f} |",
        f"| HNSW in-process (`LocalShard.search`) | {v['hnsw_p50']:.2f} | {v['hnsw_p99']:.2f} |",
        f"| `VectorIndex.search` (HNSW + Redis version check) | {v['index_search_p50']:.2f} | "
        f"{v['index_search_p99']:.2f} |",
        f"| `VectorIndex.exact_search` (numpy + Redis version check) | {v['index_exact_p50']:.2f} | "
        f"{v['index_exact_p99']:.2f} |",
        "",
        f"- HNSW / brute force p50 ratio: **{v['hnsw_p50'] / v['numpy_p50']:.2f}** "
        f"(in-process), {v['index_search_p50'] / v['index_exact_p50']:.2f} (through VectorIndex)",
        f"- recall@10 HNSW vs exact: **{v['recall10']:.4f}**; recall@40 (hybrid's candidate pool): "
        f"{v['recall40']:.4f}; numpy top 10 vs `exact_search` agreement: {v['numpy_vs_index_exact']:.4f}",
        *(
            []
            if f["has_graph"]
            else ["- **no HNSW graph at this size** (< hnsw_min_size): the 'HNSW' rows are exact search"]
        ),
        f"- usearch {usearch.__version__}: connectivity {p['connectivity']}, expansion add/search "
        f"{p['expansionAdd']}/{p['expansionSearch']}, dtype {p['dtype']}, build threads {p['buildThreads']}; "
        f"shard load from Redis {f['shard_load_s']:.1f} s, HNSW build {f['hnsw_build_s']:.1f} s (background)",
        "",
        *render_ef_sweep(v.get("ef_sweep") or []),
        "### Corpus load (ready episodes; the session path is benchmarks/ingest.py)",
        "",
        "| path | episodes | seconds | episodes/s |",
        "|---|---:|---:|---:|",
        f"| `coordinator.ingest`, batches of {env['batch']}, real ONNX embedding (**measured**) | "
        f"{f['ingest_sample']:,} | {f['ingest_s']:.1f} | **{f['ingest_eps']:.1f}** |",
    ]
    if f.get("bulk_n"):
        lines.append(
            f"| same `run_ingestion`, embed step = cached vectors ({fmt_bulk(res)}) | "
            f"{f['bulk_n']:,} | {f['bulk_s']:.1f} | {f['bulk_eps']:.1f} |"
        )
    steps = f.get("ingest_steps") or {}
    lines += [
        "",
        f"- measured part, seconds per step: {fmt_s(steps) or 'n/a'}; "
        f"{f['ingest_texts']:,} texts embedded in all"
        + (
            f", {f['ingest_step_texts']:,} of them by the embed step ({f['ingest_step_texts'] / steps['embed']:.0f}"
            " texts/s)"
            if steps.get("embed")
            else ""
        ),
    ]
    if f.get("bulk_n"):
        lines.append(f"- bulk part, seconds per step: {fmt_s(f['bulk_steps'])}")
        if f.get("synthetic"):
            lines.append(
                f"- {f['synthetic']:,} texts beyond episode {f.get('real_vectors', 0):,} got synthetic vectors (a "
                "cached real vector chosen by the text's hash + noise, cosine ≈ 0.9): latency and memory are "
                "representative, hit@10 at this size is not (the vectors do not match their texts)"
            )
    lines += [
        "",
        "### Memory",
        "",
        "| what | value |",
        "|---|---:|",
        f"| process RSS after load + HNSW build | {f['rss_loaded_mib']:.0f} MiB |",
        f"| process RSS at the end / peak | {f['rss_end_mib']:.0f} / {f['peak_rss_mib']:.0f} MiB |",
        f"| vector shard in process (matrix + graph) | {stats['memoryBytes'] / 2**20:.0f} MiB |",
        f"| Redis: sum of `MEMORY USAGE key SAMPLES 0` (exact) over all {f['redis_keys']:,} keys | "
        f"{f['redis_key_bytes'] / 2**20:.0f} MiB = **{f['redis_key_bytes'] / n:,.0f} bytes per episode** |",
        f"| Redis: used_memory delta (shared server, noisy) | {f['redis_used_delta'] / 2**20:.0f} MiB = "
        f"{f['redis_used_delta'] / n:,.0f} bytes per episode |",
        "",
        "Bytes per episode include its record, timeline entry, BM25 postings, float32 vector and the "
        "distilled memories (about 1 in 5 episodes carries a fact) with their own indexes.",
        "",
        "Reproduce: `" + command + "`",
        "",
    ]
    if res.profile:
        lines += ["<details><summary>cProfile, direct hybrid searches</summary>", "", "```"]
        lines += [res.profile.strip(), "```", "", "</details>", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="corpus sizes, comma separated")
    parser.add_argument("--ingest-sample", type=int, default=5000, help="episodes ingested with real embedding")
    parser.add_argument("--batch", type=int, default=512, help="ingestion batch size")
    parser.add_argument(
        "--real-vectors",
        type=int,
        default=100_000,
        help="episodes beyond this index get synthetic vectors (perturbed real ones) instead of being embedded",
    )
    parser.add_argument("--queries", type=int, default=300, help="distinct queries per mode (3 kinds)")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up queries per mode")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--cache-dir", type=Path, default=BENCH_TMP, help="embedding cache folder")
    parser.add_argument("--drop-cache", action="store_true", help="delete the embedding cache at the end")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where recall-<size>.md go")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of hybrid search")
    parser.add_argument(
        "--bulk-with-entities",
        action="store_true",
        help="run NER and the entity graph in the cached-vector bulk load too (slow: spaCy)",
    )
    parser.add_argument("--quantize", choices=["int8"], help="AGTOS_EMBEDDING_QUANTIZE for this run")
    parser.add_argument("--hnsw-threads", type=int, default=2, help="HNSW build threads (agtos default: 1)")
    parser.add_argument("--build-timeout", type=float, default=3600.0, help="seconds to wait for HNSW")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    command = (
        "cd "
        + str(Path(__file__).resolve().parents[1])
        + " && .venv/bin/python benchmarks/recall.py "
        + (" ".join(sys.argv[1:] if argv is None else argv))
    )

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    bench = Bench(args)
    env = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load average at start "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "python": f"{platform.python_version()}, redis-py {redis.__version__} "
        f"(hiredis parser: {'yes' if redis.utils.HIREDIS_AVAILABLE else 'no'})",
        "code": source_fingerprint(),
        "thread settings": ", ".join(
            f"{name}={os.environ.get(name, 'unset')}"
            for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "AGTOS_EMBEDDING_THREADS")
        )
        + ", ONNX spin-waiting off (agtos default)",
        "batch": f"{args.batch}; HNSW build threads {args.hnsw_threads}; embedding quantize: {args.quantize or 'none'}",
        "corpus": f"benchmarks/corpus.py v{GENERATOR_VERSION}, seed {args.seed}, one user",
    }
    outputs = []
    try:
        for n in sizes:
            t, stamp = time.perf_counter(), Stamp()
            res = bench.run_size(n)
            env_n = {**env, "load average at end": " ".join(f"{x:.2f}" for x in os.getloadavg())}
            env_n["wall time"] = f"{time.perf_counter() - t:.0f} s for this size"
            text = render(res, command, env_n)
            args.results_dir.mkdir(parents=True, exist_ok=True)
            stem = f"recall-{n}" + (f"-{args.quantize}" if args.quantize else "")
            (args.results_dir / f"{stem}.md").write_text(text)
            facts = {**summary(res), "quantize": args.quantize, "stamp": stamp.done()}
            (args.results_dir / f"{stem}.json").write_text(json.dumps(facts, indent=1, default=str))
            outputs.append(text)
            print(text, flush=True)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        bench.cleanup()
        shutil.rmtree(RUN_TMP, ignore_errors=True)
        if args.drop_cache and bench.cache is not None:
            shutil.rmtree(bench.cache.folder, ignore_errors=True)
    if len(outputs) > 1:
        log("all sizes done; tables above, files in " + str(args.results_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
