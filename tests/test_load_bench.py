"""The load benchmark runs (tiny): its own `agtos serve` in two layouts (queue mode with the worker
thread; `--no-worker` beside a separate `agtos worker` process), the mixed workload, per-endpoint
figures, no errors, the ingestion queue drained after the load, and the side-by-side table."""

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
            "--layouts",
            "thread,process",
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
    for layout in ("thread", "process"):
        part = out.split(f"# layout {layout}: ", 1)[1].split("# layout", 1)[0]
        assert re.search(rf"== 3 clients \[{layout}\], [\d.]+ s: \d+ requests, [\d.]+ req/s, 0 errors", part), out
        for endpoint in ("append", "search", "context", "end"):
            row = re.search(rf"^{endpoint}\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+0$", part, re.MULTILINE)
            assert row and int(row.group(1)) > 0, (layout, endpoint, out)
        assert re.search(r"server RSS \d+ MiB; ingestion queue drained: yes", part), out
    table = out.split("== side by side\n", 1)[1].splitlines()
    assert table[0].split()[:3] == ["layout", "clients", "req/s"]
    assert [row.split()[:2] for row in table[1:3]] == [["thread", "3"], ["process", "3"]]
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
