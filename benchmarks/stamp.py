"""When, on what and under which load a benchmark ran: stored in every results JSON and printed
in the README tables (``benchmarks/readme.py``)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """Short HEAD commit, ``+dirty`` when agtos/ or benchmarks/ differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "agtos", "benchmarks"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


class Stamp:
    """Start a stamp when a run begins; ``done()`` adds the end time and load."""

    def __init__(self) -> None:
        self.started = time.time()
        self.load_start = load()

    def done(self) -> dict[str, Any]:
        return {
            "date": time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(self.started)),
            "commit": git_commit(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "load_start": self.load_start,
            "load_end": load(),
            "wall_s": round(time.time() - self.started, 1),
        }
