"""Every benchmark in one command; prints each script's tables in turn, then one summary table.

    python -m benchmarks.suite [--sizes 10000,100000,1000000] [--quick] [--summary-only]

* search latency p50/p99 per mode, ingestion throughput, RSS and bytes per memory, HNSW vs
  brute-force numpy cosine (ratio, recall@10)      → benchmarks/recall.py
* pair selection vs the naive pairwise loop, full lint sweep  → benchmarks/lint.py
* retrieval quality: recall@k / MRR / update accuracy per mode → benchmarks/eval/harness.py

``--quick`` runs only the 10k sizes (a few minutes); the default takes about an hour on 2 cores,
most of it embedding the 100k-memory corpus once (cached for later runs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGETS = "targets at 100k: p50 < 15 ms, p99 < 50 ms, HNSW recall@10 ≥ 0.95, ingestion ≥ 200 episodes/s"


def _load(name: str) -> dict | None:
    path = RESULTS / name
    return json.loads(path.read_text()) if path.is_file() else None


def summary_table() -> list[str]:
    """One table from the JSON each script wrote: search per mode beside the numpy baseline,
    HNSW recall, ingestion, memory per episode, lint time."""
    found = (r for p in RESULTS.glob("recall-*.json") if (r := _load(p.name)))
    rows = sorted(found, key=lambda r: (r["size"], r.get("quantize") or ""))
    lines = [
        f"## Summary ({TARGETS})",
        "",
        "| episodes | hybrid p50/p99 | vector p50/p99 | bm25 p50/p99 | numpy brute force p50 | HNSW p50 (×faster) "
        "| recall@10 | ingestion, full / bulk (eps) | Redis bytes/episode | RSS |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lat, vec = r["latency"], r["vector"]
        modes = " | ".join(
            f"{lat[m]['http_p50']:.1f} / {lat[m]['http_p99']:.1f} ms" for m in ("hybrid", "vector", "bm25")
        )
        bulk = f"{r['bulk_eps']:.0f}" if r.get("bulk_eps") else "—"
        lines.append(
            f"| {r['size']:,}{' (synthetic vectors)' if r.get('synthetic') else ''}"
            f"{' (int8 embedder)' if r.get('quantize') else ''} | {modes} "
            f"| {vec['numpy_p50']:.2f} ms | {vec['hnsw_p50']:.2f} ms (×{vec['numpy_p50'] / vec['hnsw_p50']:.1f}) "
            f"| {vec['recall10']:.3f} | {r['ingest_eps']:.0f} / {bulk} | {r['redis_bytes_per_episode']:,.0f} "
            f"| {r['rss_loaded_mib'] / 1024:.1f} GiB |"
        )
    lint = _load("lint.json")
    if lint:
        lines += [
            "",
            "| conclusions | pair selection | naive loop (est.) | ratio | full lint sweep |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in lint["sizes"]:
            lines.append(
                f"| {r['n']:,} | {r['select_s']:.2f} s | {r['naive_estimate_s']:.0f} s "
                f"| ×{r['naive_estimate_s'] / r['select_s']:.0f} | {r['lint_s']:.1f} s |"
            )
    quality = _load("eval-devset.json")
    if quality:
        lines += ["", "| mode | recall_any@5 | @10 | MRR |", "|---|---:|---:|---:|"]
        for mode, v in quality["modes"].items():
            o = v["overall"]
            lines.append(f"| {mode} | {o['recall_any@5']:.3f} | {o['recall_any@10']:.3f} | {o['mrr']:.3f} |")
    lines += ["", "HTTP in-process latencies, query embedding included; per-size details in benchmarks/results/."]
    return lines


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
    parser.add_argument("--summary-only", action="store_true", help="only print the table of the last results")
    args = parser.parse_args()
    if args.summary_only:
        print("\n".join(summary_table()))
        return
    sizes = "10000" if args.quick else args.sizes
    lint_sizes = ",".join(s for s in sizes.split(",") if int(s) <= 100_000) or "10000"  # the issue asks lint at 100k
    codes = [
        run(
            "search, ingestion, memory (benchmarks/recall.py)",
            ["benchmarks/recall.py", "--sizes", sizes, "--redis-url", args.redis_url],
        ),
        run(
            "lint (benchmarks/lint.py)", ["-m", "benchmarks.lint", "--sizes", lint_sizes, "--redis-url", args.redis_url]
        ),
        run(
            "retrieval quality (benchmarks/eval/harness.py)",
            ["-m", "benchmarks.eval.harness", "--redis-url", args.redis_url],
        ),
    ]
    print("\n" + "\n".join(summary_table()))
    print("\nresults: benchmarks/results/ (recall-<size>.md/.json, lint.json, eval-devset.json)")
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
