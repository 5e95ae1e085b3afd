"""Every benchmark in one command; prints each script's tables in turn, then where they were written.

    python -m benchmarks.suite [--sizes 10000,100000] [--quick]

* search latency p50/p99 per mode, ingestion throughput, RSS and bytes per memory, HNSW vs
  brute-force numpy cosine (ratio, recall@10)      → benchmarks/recall.py
* pair selection vs the naive pairwise loop, full lint sweep  → benchmarks/lint.py
* retrieval quality: recall@k / MRR / update accuracy per mode → benchmarks/eval/harness.py

``--quick`` runs only the 10k sizes (a few minutes); the default takes about an hour on 2 cores,
most of it embedding the 100k-memory corpus once (cached for later runs).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(title: str, args: list[str]) -> int:
    print(f"\n## {title}\n\n$ {' '.join(args)}\n", flush=True)
    started = time.perf_counter()
    code = subprocess.call([sys.executable, *args], cwd=ROOT)
    print(f"\n({title}: exit {code}, {time.perf_counter() - started:.0f} s)", flush=True)
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--quick", action="store_true", help="10k only")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    sizes = "10000" if args.quick else args.sizes
    codes = [
        run(
            "search, ingestion, memory (benchmarks/recall.py)",
            ["benchmarks/recall.py", "--sizes", sizes, "--redis-url", args.redis_url],
        ),
        run("lint (benchmarks/lint.py)", ["-m", "benchmarks.lint", "--sizes", sizes, "--redis-url", args.redis_url]),
        run(
            "retrieval quality (benchmarks/eval/harness.py)",
            ["-m", "benchmarks.eval.harness", "--redis-url", args.redis_url],
        ),
    ]
    print("\nresults: benchmarks/results/ (recall-<size>.md, eval-devset.json)")
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
