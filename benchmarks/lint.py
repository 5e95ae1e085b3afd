"""Lint benchmark: pair selection (DuckDB/Polars) at 10k and 100k conclusions, the naive pairwise
baseline, and a full six-step lint sweep over conclusions stored in Redis.

    python -m benchmarks.lint [--sizes 10000,100000] [--naive-size 3000] [--redis-url URL]

Conclusion vectors are hashed bag-of-words vectors (similar texts → similar vectors), so the
benchmark measures the lint machinery, not the embedding model. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
import uuid
from pathlib import Path

import numpy as np
import redis

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.lint_pipeline import run_lint
from agtos.schemas import Conclusion
from agtos.schemas.records import now_ms
from agtos.tasks.pair_selection import naive_pairs, pairs_as_tuples, redundant_pairs
from agtos.tasks.text import words
from benchmarks.stamp import Stamp

RESULTS_DIR = Path(__file__).resolve().parent / "results"

SUBJECTS = [
    "coffee",
    "tea",
    "hiking",
    "jazz",
    "python",
    "rust",
    "trains",
    "sushi",
    "chess",
    "yoga",
    "cycling",
    "opera",
    "podcasts",
    "gardening",
    "photography",
    "running",
    "baking",
    "kayaking",
    "sci-fi",
    "museums",
]
VERBS = [
    "likes",
    "prefers",
    "often asks about",
    "plans trips around",
    "reads about",
    "talks about",
    "spends weekends on",
    "wants reminders about",
    "keeps notes on",
    "compares prices of",
]
QUALIFIERS = [
    "in the morning",
    "after work",
    "on weekends",
    "with friends",
    "when travelling",
    "in winter",
    "during lunch",
    "late at night",
    "with family",
    "before meetings",
    "every month",
    "on holidays",
]
USER = "bench-user"
DIM = 384


def corpus(n: int, seed: int = 7) -> list[str]:
    """Varied conclusions with ~3% planted near-duplicates and a few contradictions."""
    rng = random.Random(seed)
    texts = []
    for i in range(n):
        roll = rng.random()
        if texts and roll < 0.03:
            texts.append(rng.choice(texts) + " too")  # a near-duplicate (Jaccard ≥ 0.85 for most)
        elif roll < 0.035:
            texts.append(rng.choice(["User is vegetarian", "User eats steak every day"]) + f" since {1990 + i % 30}")
        else:
            a, b = rng.sample(SUBJECTS, 2)
            texts.append(f"User {rng.choice(VERBS)} {a} and {b} {rng.choice(QUALIFIERS)} #{i}")
    return texts


def hashed_vectors(texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in words(text):
            out[row, int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % DIM] += 1.0
    out /= np.linalg.norm(out, axis=1, keepdims=True) + 1e-9
    return out


def check_same_pairs(naive: list[tuple[str, str, float]], fast: list[tuple[str, str, float]]) -> None:
    """The two selections must hold the same (a, b) pairs with the same Jaccard (not only as many)."""
    want, got = {(a, b): j for a, b, j in naive}, {(a, b): j for a, b, j in fast}
    if want.keys() != got.keys():
        missing, extra = sorted(want.keys() - got.keys())[:5], sorted(got.keys() - want.keys())[:5]
        raise SystemExit(f"pair sets differ: missing {missing}, extra {extra} (first 5 each)")
    off = [(p, want[p], got[p]) for p in want if abs(want[p] - got[p]) > 1e-9]
    if off:
        raise SystemExit(f"Jaccard differs on {len(off)} pairs, e.g. {off[:3]}")


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def bench_size(n: int, redis_url: str, naive_seconds_per_pair: float) -> dict[str, object]:
    texts = corpus(n)
    ids = [f"c{i:07d}" for i in range(n)]
    pairs, select_s = timed(redundant_pairs, ids, texts, 0.85)
    prefix = f"agtos-bench-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        redis_url=redis_url, key_prefix=prefix, data_dir=Path("/tmp/agtos-bench"), background_work_policy="always"
    )
    coordinator = MemoryCoordinator(settings)
    try:
        stamp = now_ms()
        conclusions = [
            Conclusion(
                id=cid,
                user_id=USER,
                text=text,
                type="inductive",
                confidence=0.3 + 0.7 * ((i * 37) % 100) / 100,
                source_episode_ids=[f"ep-{i % 500}"],
                created_at=stamp - i * 60_000,
                updated_at=stamp - i * 60_000,
            )
            for i, (cid, text) in enumerate(zip(ids, texts, strict=True))
        ]
        vectors = hashed_vectors(texts)
        load_s = 0.0
        for start in range(0, n, 5_000):
            _, took = timed(
                coordinator.conclusions.upsert_many, conclusions[start : start + 5_000], vectors[start : start + 5_000]
            )
            load_s += took
        report, lint_s = timed(run_lint, coordinator.services, USER)
    finally:
        client = redis.Redis.from_url(redis_url)
        batch = list(client.scan_iter(match=f"{prefix}:*", count=5_000))
        for start in range(0, len(batch), 5_000):
            client.unlink(*batch[start : start + 5_000])
        coordinator.close()
    steps = {s["step"]: s for s in report.steps}
    naive_estimate = naive_seconds_per_pair * n * (n - 1) / 2
    return {
        "n": n,
        "pairs": pairs.height,
        "select_s": select_s,
        "naive_estimate_s": naive_estimate,
        "load_s": load_s,
        "lint_s": lint_s,
        "merge_ms": steps["merge"]["ms"],
        "contradiction_ms": steps["contradictions"]["ms"],
        "pipeline": report.summary["contradictionPipeline"],
        "after": report.summary["conclusionsAfter"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--naive-size", type=int, default=3_000)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where lint.json goes")
    args = parser.parse_args()

    stamp = Stamp()
    n0 = args.naive_size
    texts, ids = corpus(n0), [f"c{i}" for i in range(n0)]
    naive, naive_s = timed(naive_pairs, ids, texts, 0.85)
    fast, fast_s = timed(redundant_pairs, ids, texts, 0.85)
    check_same_pairs(naive, pairs_as_tuples(fast))
    per_pair = naive_s / (n0 * (n0 - 1) / 2)
    print(
        f"baseline at {n0}: naive {naive_s:.2f} s, DuckDB/Polars {fast_s:.3f} s "
        f"(×{naive_s / fast_s:.0f} faster; the same {fast.height} pairs, ids and Jaccard)"
    )

    rows = [bench_size(int(n), args.redis_url, per_pair) for n in args.sizes.split(",")]
    print(
        "\n| conclusions | pairs ≥0.85 | pair selection | naive (est.) | ratio | load | full lint | merge step "
        "| contradiction step (s1/s2/s3 ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lat = r["pipeline"]["latencies"]  # type: ignore[index]
        print(
            f"| {r['n']:,} | {r['pairs']:,} | {r['select_s']:.2f} s | {r['naive_estimate_s']:.0f} s "
            f"| ×{r['naive_estimate_s'] / r['select_s']:.0f} | {r['load_s']:.1f} s | {r['lint_s']:.1f} s "
            f"| {r['merge_ms'] / 1000:.2f} s | {r['contradiction_ms'] / 1000:.2f} s "
            f"({lat['stage1Ms']:.0f}/{lat['stage2Ms']:.0f}/{lat['stage3Ms']:.0f}) |"
        )
    args.results_dir.mkdir(parents=True, exist_ok=True)
    summary = {
        "naive_size": n0,
        "naive_s": naive_s,
        "fast_s": fast_s,
        "naive_pairs": len(naive),
        "pair_sets_equal": True,  # check_same_pairs exits otherwise
        "sizes": rows,
        "stamp": stamp.done(),
    }
    (args.results_dir / "lint.json").write_text(json.dumps(summary, indent=1, default=str))
    print(
        "\nTarget: pair selection < 10 s at 100k. Naive times beyond the measured baseline size are "
        "extrapolated (O(n²)) from it. Reproduce: python -m benchmarks.lint"
    )


if __name__ == "__main__":
    main()
