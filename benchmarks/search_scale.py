"""Search latency at scale: p50/p99 of ``GET /api/memory/search`` through the HTTP route (query
embedding included, query cache off) over one user's index of episodes with their verbatim turns
and memories — the issue's "1M indexed texts" shape, at the size this host can build.

    python -m benchmarks.search_scale [--texts 100000] [--queries 300] [--batch 64]

The corpus is the conversation set's sessions (``benchmarks/eval/convset.json``: dated two-person
chats), replicated until ``--texts`` texts are indexed (episode + turn units + memories), all for
one user, the worst case (each user has an index of their own). The base sessions go through the
real steps once — summarise, distil, turn records with resolved dates, units, real ONNX vectors.
Each replica is that session moved ``k`` weeks later under new ids: its turns keep their words and
get the new dates in their unit prefix (the relative-date annotations of the base are not redone),
its episode summary names the replica, and every vector is the base text's real vector plus
Gaussian noise (cosine ≈ 0.9 to it), renormalised, so the HNSW graph holds distinct points.
Everything is written through ``index_batch`` (the ingestion pipeline's index step: Redis records,
BM25 and vector indexes); NER, the entity graph and the Dreamer are not run for the replicas.
The queries are the set's questions (real text, embedded per query). The query embedding alone is
timed on the same queries, so the rest of the search reads apart from it.

Writes ``benchmarks/results/search-scale-<texts>.json`` and ``.md``; every key is deleted at the
end. Not a test.
"""

# ruff: noqa: I001 - benchmarks.recall first: it sets PREFECT_HOME and the import order agtos needs

from __future__ import annotations

import benchmarks.recall  # noqa: F401

import argparse
import cProfile
import importlib
import importlib.util
import inspect
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import redis

from agtos.config import Settings
from agtos.memory import recall
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.episodic import build_episode
from agtos.memory.ingestion_pipeline import index_batch
from agtos.schemas import Episode, Memory, Role, StoredTurn, Turn
from agtos.serving.app import create_app
from agtos.tasks.distil import distil_memories
from agtos.tasks.text import episode_text
from agtos.tasks.verbatim_turns import TurnBatch, TurnUnit, stored_turns, turn_units
from benchmarks.eval.api_eval import turn_timestamps
from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.harness import REPO, agtos_session_id
from benchmarks.recall import (
    RESULTS_DIR,
    RUN_TMP,
    AsgiClient,
    delete_prefix,
    log,
    pct,
    rss_mib,
)
from benchmarks.round_trips import RoundTrips
from benchmarks.stamp import Stamp

DEFAULT_DATASET = REPO / "benchmarks" / "eval" / "convset.json"
USER_ID = "bench-scale"
WEEK_MS = int(timedelta(weeks=1).total_seconds() * 1000)
NOISE = 0.48  # per-vector noise norm: cosine ≈ 0.9 to the base vector (as benchmarks/recall.py)
TARGET = "p50 < 15 ms, p99 < 50 ms at 1M indexed texts"


@dataclass(frozen=True)
class Base:
    """One real session as ingestion stores it, with the real vectors of its texts."""

    episode: Episode
    memories: list[Memory]
    turns: list[StoredTurn]
    vectors: np.ndarray  # episode row, memory rows, then one row per unit of turn_units(turns)

    @property
    def texts(self) -> int:
        return len(self.vectors)


def base_sessions(coord: MemoryCoordinator, path: str) -> list[Base]:
    """Every session of the set through the real steps (summary, facts, turn records, units) and
    the real embedder; sessions the save heuristics would skip are left out, as ingestion does."""
    data = load_dataset(path)
    drafts = []
    for h in data.haystacks:
        for sid, turns, stamps in zip(h.haystack_session_ids, h.haystack_sessions, turn_timestamps(h), strict=True):
            said = [
                Turn(role=Role(t.role), content=t.content, timestamp=ts, name=t.name)
                for t, ts in zip(turns, stamps, strict=True)
                if t.content.strip()
            ]
            draft = build_episode(USER_ID, agtos_session_id(sid), said, coord.services.summariser)
            if draft.decision.save:
                drafts.append((draft.episode, said))
    out = []
    for episode, said in drafts:
        memories = distil_memories([episode])
        kept = stored_turns(USER_ID, episode.id, episode.session_id, said)
        texts = [episode_text(episode), *(m.text for m in memories), *(u.text for u in turn_units(kept))]
        out.append(Base(episode, memories, kept, coord.semantic.embedder.embed(texts)))
    return out


def replica(base: Base, k: int, rng: np.random.Generator) -> tuple[Episode, list[Memory], TurnBatch, np.ndarray]:
    """``base`` moved ``k`` weeks later under new ids, with noisy copies of its vectors."""
    shift = k * WEEK_MS
    episode_id = f"{base.episode.id}-r{k}"
    episode = base.episode.model_copy(
        update={
            "id": episode_id,
            "session_id": f"{base.episode.session_id}-r{k}",
            "summary": f"{base.episode.summary} (replica {k})",
            "timestamp": base.episode.timestamp + shift,
        }
    )
    memories = [
        m.model_copy(update={"id": f"{m.id}-r{k}", "source_episode_ids": [episode_id], "text": f"{m.text} ({k})"})
        for m in base.memories
    ]
    turns = [
        t.model_copy(
            update={
                "episode_id": episode_id,
                "session_id": episode.session_id,
                "timestamp": t.timestamp + shift,
                "dates": [],
            }
        )
        for t in base.turns
    ]
    units: list[TurnUnit] = turn_units(turns)
    n = 1 + len(memories) + len(units)
    vectors = base.vectors[:n] + rng.normal(0.0, NOISE / np.sqrt(base.vectors.shape[1]), (n, base.vectors.shape[1]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return episode, memories, TurnBatch(turns, units), vectors.astype(np.float32)


def load(coord: MemoryCoordinator, bases: list[Base], target: int, batch: int) -> dict[str, Any]:
    """Index replicas until ``target`` texts are in (base sessions first, as replica 0)."""
    rng = np.random.default_rng(14)
    rt, texts, sessions, k = coord.services, 0, 0, 0
    started = time.perf_counter()
    while texts < target:
        for start in range(0, len(bases), batch):
            group = [replica(b, k, rng) for b in bases[start : start + batch]]
            episodes = [g[0] for g in group]
            memories = [m for g in group for m in g[1]]
            turns = TurnBatch([t for g in group for t in g[2].turns], [u for g in group for u in g[2].units])
            vectors = np.concatenate(
                [np.stack([g[3][0] for g in group])]
                + [g[3][1 : 1 + len(g[1])] for g in group]
                + [g[3][1 + len(g[1]) :] for g in group]
            )
            index_batch(rt, episodes, memories, vectors, turns)
            texts += len(vectors)
            sessions += len(group)
            if texts >= target:
                break
        k += 1
        elapsed = time.perf_counter() - started
        log(f"  {texts:,} texts ({sessions:,} sessions) in {elapsed:.0f} s ({texts / elapsed:.0f} texts/s)")
    return {"texts": texts, "sessions": sessions, "load_s": time.perf_counter() - started}


def wait_for_graphs(coord: MemoryCoordinator, timeout_s: float) -> dict[str, Any]:
    """First search of each namespace loads its shard from Redis and starts the HNSW build; wait."""
    out: dict[str, Any] = {}
    probe = coord.semantic.embedder.embed(["probe query"])[0]
    for namespace in ("episode", "turn", "memory"):
        vectors = coord.semantic.store(namespace).vectors
        t = time.perf_counter()
        vectors.search(USER_ID, probe, 10)
        loaded = time.perf_counter() - t
        if not vectors.wait_for_builds(USER_ID, timeout_s=timeout_s):
            raise RuntimeError(f"HNSW build of {namespace} did not finish in {timeout_s} s")
        stats = vectors.stats()
        out[namespace] = {"docs": stats["docs"], "graph": stats["hnswUsers"] == 1, "load_s": loaded}
        out[namespace]["build_s"] = time.perf_counter() - t - loaded
        built = out[namespace]["build_s"]
        log(f"  {namespace}: {stats['docs']:,} vectors, shard load {loaded:.1f} s, graph {built:.1f} s")
    return out


def questions(path: str, count: int) -> list[str]:
    return list(dict.fromkeys(q.question for q in load_dataset(path).questions))[:count]


def timed_search(client: Any, q: str, headers: dict[str, str]) -> tuple[float, Any]:
    """One ``/api/memory/search`` through HTTP: its wall time and response (a non-200 is an error)."""
    t = time.perf_counter()
    response = client.get("/api/memory/search", params={"q": q, "limit": 10}, headers=headers)
    seconds = time.perf_counter() - t
    if response.status_code != 200:
        raise RuntimeError(f"search answered {response.status_code}: {response.text[:200]}")
    return seconds, response


def time_search(coord: MemoryCoordinator, queries: list[str], warmup: int) -> dict[str, float]:
    """HTTP p50/p99 of the default search, then the query embedding alone on the same queries."""
    embedder = coord.semantic.embedder
    cache = getattr(embedder, "cache", None)
    if cache is not None:
        cache.size = 0  # every query is embedded (no LRU hits)
    headers = {"X-User-Id": USER_ID}
    http: list[float] = []
    hits = 0
    with AsgiClient(create_app(coordinator=coord)) as client:
        for q in [f"warm-up {i}: what did they talk about?" for i in range(warmup)]:
            client.get("/api/memory/search", params={"q": q, "limit": 10}, headers=headers)
        for q in queries:
            seconds, response = timed_search(client, q, headers)
            http.append(seconds)
            hits += bool(response.json()["results"])
    embed: list[float] = []
    for q in queries:
        t = time.perf_counter()
        embedder.embed_one(q)
        embed.append(time.perf_counter() - t)
    return {
        "queries": len(queries),
        "answered_with_hits": hits,
        "http_p50": pct(http, 50),
        "http_p99": pct(http, 99),
        "http_mean": statistics.fmean(http) * 1e3,
        "embed_p50": pct(embed, 50),
        "embed_p99": pct(embed, 99),
    }


def profile(coord: MemoryCoordinator, queries: list[str]) -> str:
    """The direct search (no HTTP) under cProfile: the functions with most cumulative, then most own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    for q in queries:
        coord.search_episodes(USER_ID, q, 10)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)
    return out.getvalue()


SWAPPED = (
    "agtos.memory.recall",
    "agtos.memory.semantic",
    "agtos.storage.semantic_store",
    "agtos.storage.turns",
    "agtos.storage.bm25_mirror",
    "agtos.tasks.ranking",
)


def module_at(rev: str, name: str) -> ModuleType:
    """Module ``name`` as it was at git revision ``rev``, under another name (it imports the rest of
    agtos as it is now)."""
    path = name.replace(".", "/") + ".py"
    source = subprocess.run(["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True, cwd=REPO)
    file = Path(tempfile.mkdtemp()) / f"{name.rsplit('.', 1)[-1]}_baseline.py"
    file.write_text(source.stdout)
    spec = importlib.util.spec_from_file_location(f"{name}_baseline", file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


Swap = tuple[Any, str, Any]  # (module or class, attribute, value)


def _source(fn: Any) -> str | None:
    """A function's source; None for one generated at run time (a dataclass's ``__init__``)."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


def baseline_swaps(rev: str, names: tuple[str, ...] = SWAPPED) -> tuple[list[Swap], list[Swap]]:
    """What to set for the code of ``names`` at ``rev`` (functions and methods whose source differs,
    wherever agtos modules bound them), and what sets it back."""
    old_of: dict[int, Any] = {}
    methods: list[Swap] = []
    for name in names:
        current, old = importlib.import_module(name), module_at(rev, name)
        for attr, value in vars(old).items():
            here = getattr(current, attr, None)
            if inspect.isfunction(value) and inspect.isfunction(here) and value.__module__ == old.__name__:
                if _source(value) != _source(here):
                    old_of[id(here)] = value
            elif inspect.isclass(value) and inspect.isclass(here) and value.__module__ == old.__name__:
                for method, fn in vars(value).items():
                    now = vars(here).get(method)
                    if (
                        not inspect.isfunction(fn)
                        or _source(fn) is None
                        or (now is not None and _source(fn) == _source(now))
                    ):
                        continue
                    if "__class__" in fn.__code__.co_freevars:  # super(): bound to the baseline's class
                        raise RuntimeError(f"{name}.{attr}.{method} changed and calls super(): not swappable")
                    methods.append((here, method, fn))
    swaps = list(methods)
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("agtos.")]:
        swaps += [(module, a, old_of[id(v)]) for a, v in list(vars(module).items()) if id(v) in old_of]
    undo = [(owner, attr, vars(owner).get(attr)) for owner, attr, _ in swaps]
    return swaps, undo


def apply(swaps: list[Swap]) -> None:
    for owner, attr, value in swaps:
        if value is None:
            delattr(owner, attr)
        else:
            setattr(owner, attr, value)


def _shown(hits: list[Any]) -> list[tuple[Any, ...]]:
    """What a search answers: episode, score, match type, highlights (turn, score, text)."""
    return [
        (
            h.episode.id,
            h.score,
            h.match_type,
            tuple((x.turn.episode_id, x.position, x.score, x.speaker, x.timestamp, x.text) for x in h.highlights),
        )
        for h in hits
    ]


def compare(coord: MemoryCoordinator, queries: list[str], rev: str, rounds: int) -> dict[str, Any]:
    """``recall`` at ``rev`` (baseline) and now (new), alternated in this process, query cache off:
    per round, CPU (process_time), wall and Redis round trips (mean) of the direct search (embedding
    included), then HTTP p50/p99; the answers of both must be identical on every query."""
    to_baseline, to_new = baseline_swaps(rev)
    log(f"  baseline {rev}: {len(to_baseline)} functions swapped: " + ", ".join(sorted({a for _, a, _ in to_baseline})))
    cache = getattr(coord.semantic.embedder, "cache", None)
    if cache is not None:
        cache.size = 0
    variants: dict[str, list[Swap]] = {"baseline": to_baseline, "new": to_new}
    rt = coord.services
    trips = RoundTrips(coord.connector.client)
    out: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    answers: dict[str, list[Any]] = {}
    headers = {"X-User-Id": USER_ID}
    try:
        with AsgiClient(create_app(coordinator=coord)) as client:
            for r in range(rounds):
                for name in variants if r % 2 == 0 else reversed(list(variants)):
                    apply(variants[name])
                    search = recall.search_episodes
                    for q in queries[:10]:  # warm-up
                        search(rt, USER_ID, q, 10)
                    cpu: list[float] = []
                    wall: list[float] = []
                    sent: list[int] = []
                    got = []
                    for q in queries:
                        before = len(trips.sent)
                        c, t = time.process_time(), time.perf_counter()
                        hits = search(rt, USER_ID, q, 10)
                        wall.append(time.perf_counter() - t)
                        cpu.append(time.process_time() - c)
                        sent.append(len(trips.sent) - before)
                        got.append(_shown(hits))
                    answers.setdefault(name, got)
                    if got != answers[name]:
                        raise RuntimeError(f"{name}: answers changed between rounds")
                    http: list[float] = []
                    for q in queries:
                        http.append(timed_search(client, q, headers)[0])
                    row = {
                        "cpu_mean": statistics.fmean(cpu) * 1e3,
                        "cpu_p50": pct(cpu, 50),
                        "wall_p50": pct(wall, 50),
                        "wall_mean": statistics.fmean(wall) * 1e3,
                        "http_p50": pct(http, 50),
                        "http_p99": pct(http, 99),
                        "round_trips": statistics.fmean(sent),
                        "load": os.getloadavg()[0],
                    }
                    out[name].append(row)
                    log(f"  round {r} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()))
    finally:
        apply(to_new)
    differ = sum(a != b for a, b in zip(answers["baseline"], answers["new"], strict=True))
    best = {name: {k: min(row[k] for row in rows) for k in rows[0]} for name, rows in out.items()}
    ratio = {k: best["new"][k] / best["baseline"][k] for k in best["new"] if k != "load"}
    log(f"  answers differing: {differ} of {len(queries)}; best-of-{rounds} ratios new/baseline: {ratio}")
    return {"baseline": rev, "rounds": out, "best": best, "ratio": ratio, "differ": differ}


def paired(coord: MemoryCoordinator, queries: list[str], rev: str, rounds: int) -> dict[str, Any]:
    """``recall`` at ``rev`` (baseline) and now (new) back to back on each query, which first alternating,
    query cache off, the first round a warm-up: wall and CPU p50 of the direct search (embedding
    included) and the median per-query wall ratio; a load that drifts weighs on both alike."""
    to_baseline, to_new = baseline_swaps(rev)
    cache = getattr(coord.semantic.embedder, "cache", None)
    if cache is not None:
        cache.size = 0
    variants: dict[str, list[Swap]] = {"baseline": to_baseline, "new": to_new}
    rt = coord.services
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    ratios: list[float] = []
    loads: list[float] = []
    differ = 0
    try:
        for r in range(rounds):
            for i, q in enumerate(queries):
                got: dict[str, tuple[float, float, Any]] = {}
                for name in ("baseline", "new") if (i + r) % 2 == 0 else ("new", "baseline"):
                    apply(variants[name])
                    c, t = time.process_time(), time.perf_counter()
                    hits = recall.search_episodes(rt, USER_ID, q, 10)
                    got[name] = (time.perf_counter() - t, time.process_time() - c, _shown(hits))
                differ += got["baseline"][2] != got["new"][2]
                if r:
                    for name, (w, c, _) in got.items():
                        wall[name].append(w)
                        cpu[name].append(c)
                    ratios.append(got["new"][0] / got["baseline"][0])
            loads.append(os.getloadavg()[0])
    finally:
        apply(to_new)
    out = {
        "baseline": rev,
        "rounds": rounds - 1,
        "wall_p50": {name: pct(v, 50) for name, v in wall.items()},
        "cpu_p50": {name: pct(v, 50) for name, v in cpu.items()},
        "median_ratio": statistics.median(ratios) if ratios else float("nan"),
        "differ": differ,
        "load": [min(loads), max(loads)],
    }
    log(f"  paired vs {rev}: {out}")
    return out


def render(r: dict[str, Any]) -> str:
    st, lat, idx = r["stamp"], r["latency"], r["index"]
    docs = {ns: v["docs"] for ns, v in idx.items()}
    return "\n".join(
        [
            f"{st['date']}, commit {st['commit']}, {st['machine']}, load average {st['load_start']} → {st['load_end']}",
            "",
            "| indexed texts (one user) | episodes / turn units / memories | HTTP p50 / p99 | query embedding "
            "alone p50 / p99 | target |",
            "|---:|---|---:|---:|---|",
            f"| {sum(docs.values()):,} | {docs['episode']:,} / {docs['turn']:,} / {docs['memory']:,} "
            f"| {lat['http_p50']:.1f} / {lat['http_p99']:.1f} ms | {lat['embed_p50']:.1f} / {lat['embed_p99']:.1f} ms "
            f"| {TARGET} |",
            "",
            f"{lat['queries']} distinct questions of {r['dataset']} through `GET /api/memory/search` (default hybrid, "
            f"limit 10, in process over httpx ASGITransport, query cache off); {lat['answered_with_hits']} answered "
            f"with hits. Built in {r['load']['load_s']:.0f} s ({r['load']['texts'] / r['load']['load_s']:.0f} texts/s "
            f"through the ingestion index step, vectors precomputed) + HNSW graphs "
            f"{sum(v['build_s'] + v['load_s'] for v in idx.values()):.0f} s; "
            f"process RSS {r['rss_mib'] / 1024:.1f} GiB, "
            f"Redis {r['redis_bytes'] / 2**20:,.0f} MiB.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--texts", type=int, default=100_000, help="indexed texts to build (episode + turns + memories)"
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64, help="sessions per index_batch call")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--build-timeout", type=float, default=1800.0)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--profile", action="store_true", help="print where a direct search spends its time")
    parser.add_argument("--compare", metavar="REV", help="also time recall.py at git revision REV against now")
    parser.add_argument("--rounds", type=int, default=4, help="--compare: rounds, the two alternated")
    parser.add_argument(
        "--paired", action="store_true", help="--compare: also time old and new back to back on each query"
    )
    args = parser.parse_args(argv)
    stamp = Stamp()
    prefix = f"agtos-bench-{uuid.uuid4().hex[:10]}"
    raw = redis.Redis.from_url(args.redis_url)
    redis_before = int(raw.info("memory")["used_memory"])
    settings = Settings(
        redis_url=args.redis_url, key_prefix=prefix, data_dir=RUN_TMP / "data", config_dir=RUN_TMP / "config"
    )
    coord = MemoryCoordinator(settings)
    try:
        log("embedding the base sessions (real steps, real vectors)")
        bases = base_sessions(coord, args.dataset)
        log(f"  {len(bases)} sessions, {sum(b.texts for b in bases):,} texts; loading {args.texts:,} texts")
        loaded = load(coord, bases, args.texts, args.batch)
        index = wait_for_graphs(coord, args.build_timeout)
        redis_bytes = int(raw.info("memory")["used_memory"]) - redis_before
        log(f"timing {args.queries} queries")
        latency = time_search(coord, questions(args.dataset, args.queries), args.warmup)
        log(f"  HTTP p50 {latency['http_p50']:.1f} ms, p99 {latency['http_p99']:.1f} ms")
        rss = rss_mib()
        if args.profile:
            print(profile(coord, questions(args.dataset, args.queries)))
        compared = (
            compare(coord, questions(args.dataset, args.queries), args.compare, args.rounds) if args.compare else None
        )
        if compared is not None and args.paired:
            compared["paired"] = paired(coord, questions(args.dataset, args.queries), args.compare, args.rounds + 1)
    finally:
        coord.close()
        log(f"deleted {delete_prefix(raw, prefix)} keys")
    results: dict[str, Any] = {
        "dataset": Path(args.dataset).name,
        "load": loaded,
        "index": index,
        "latency": latency,
        "rss_mib": rss,
        "redis_bytes": redis_bytes,
        "stamp": stamp.done(),
        "compare": compared,
    }
    results["markdown"] = render(results)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = f"search-scale-{args.texts}"
    (out / f"{name}.json").write_text(json.dumps(results, indent=1))
    (out / f"{name}.md").write_text(results["markdown"])
    print(results["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
