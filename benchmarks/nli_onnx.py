"""Torch vs the one-time ONNX export of a transformers NLI directory (issue 18, item 3): load time and
per-pair latency, each runtime in a fresh process (so imports count as an operator's first load does)::

    .venv/bin/python -m benchmarks.nli_onnx                 # the tiny random BERT NLI model built here
    .venv/bin/python -m benchmarks.nli_onnx --nli DIR       # a pinned real directory

Three processes: ``torch`` (``export_onnx=False``), ``onnx-export`` (the first load: torch loads the
model, exports, checks and caches it) and ``onnx-cached`` (a later load: onnxruntime only, no torch).
Each prints its load time, the RSS of the process after loading, whether torch got imported, and the
median latency of one pair and of a batch of 8 (per pair); the ratios torch / ONNX come from the same
run. For a real directory that already has an export, ``onnx-export`` measures a cached load too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PAIRS = [
    ("alice likes tea", "bob does not like tea"),
    ("she owns a zebra", "she rides a bike"),
    ("alice smith moved to paris and works at acmecorp", "she was in paris"),
    ("bob does not like coffee", "bob likes green tea"),
]
MODES = ("torch", "onnx-export", "onnx-cached")


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def child(mode: str, model_dir: Path, repeat: int) -> dict[str, Any]:
    """One runtime in this (fresh) process: load, then latency; the probabilities for the parent."""
    from agtos.providers.transformers_nli import TransformersNLIModel

    model = TransformersNLIModel(model_dir, export_onnx=mode != "torch")
    started = time.perf_counter()
    model.load()
    load_s = time.perf_counter() - started
    batch = PAIRS * 2
    return {
        "load_s": round(load_s, 3),
        "rss_mb": round(_rss_mb(), 1),
        "torch_imported": "torch" in sys.modules,
        "runtime": model.runtime_status(),
        "pair_ms": round(_median_ms(lambda: model.predict(PAIRS[:1]), repeat), 3),
        "batch8_pair_ms": round(_median_ms(lambda: model.predict(batch), repeat) / len(batch), 3),
        "scores": [v.scores for v in model.predict(PAIRS)],
    }


def run_child(mode: str, model_dir: Path, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.nli_onnx", "--child", mode, "--nli", str(model_dir)]
    out = subprocess.run([*cmd, "--repeat", str(repeat)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def compare(model_dir: Path, repeat: int) -> dict[str, Any]:
    """The three processes in order (the export happens in the second) and the torch / ONNX ratios."""
    results = {mode: run_child(mode, model_dir, repeat) for mode in MODES}
    torch_run, cached = results["torch"], results["onnx-cached"]
    gap = max(
        abs(a[label] - b[label])
        for a, b in zip(torch_run.pop("scores"), cached.pop("scores"), strict=True)
        for label in a
    )
    results["onnx-export"].pop("scores")
    results["ratios_torch_over_onnx"] = {
        "load": round(torch_run["load_s"] / cached["load_s"], 1),
        "pair_latency": round(torch_run["pair_ms"] / cached["pair_ms"], 1),
        "batch8_pair_latency": round(torch_run["batch8_pair_ms"] / cached["batch8_pair_ms"], 1),
        "rss": round(torch_run["rss_mb"] / cached["rss_mb"], 1),
    }
    results["max_probability_gap"] = float(f"{gap:.2g}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nli", type=Path, help="a pinned NLI sequence-classification directory (default: tiny)")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.nli, args.repeat)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.nli is None:
            from benchmarks.transformers_cost import build_nli_classifier

            order = {0: "entailment", 1: "neutral", 2: "contradiction"}
            model_dir = build_nli_classifier(Path(tmp) / "nli", order, None)
        else:
            model_dir = args.nli
        print(json.dumps(compare(model_dir, args.repeat), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
