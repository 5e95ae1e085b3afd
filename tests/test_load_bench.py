"""The load benchmark runs (tiny): its own `agtos serve` (queue mode + worker), the mixed workload,
per-endpoint figures, no errors, and the ingestion queue drained after the load."""

from __future__ import annotations

import re
import subprocess
import sys


def test_load_benchmark_runs_tiny_without_errors(redis_url: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.load",
            "--clients",
            "3",
            "--duration",
            "2",
            "--warm",
            "1",
            "--redis-url",
            redis_url,
            "--drain-timeout",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"== 3 clients, [\d.]+ s: \d+ requests, [\d.]+ req/s, 0 errors", out), out
    for endpoint in ("append", "search", "context", "end"):
        row = re.search(rf"^{endpoint}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+0$", out, re.MULTILINE)
        assert row and int(row.group(1)) > 0, (endpoint, out)
    assert re.search(r"server RSS \d+ MiB; ingestion queue drained: yes", out), out
    assert (
        "--url must be a loopback"
        in subprocess.run(
            [sys.executable, "-m", "benchmarks.load", "--url", "http://10.0.0.1:4102"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stderr
    )
