"""Keeps the test process's memory bounded: most tests build a coordinator (Redis pools, index
mirrors, worker threads) that ends up in reference cycles, which CPython frees only at a full
garbage collection; with ~1,800 tests those come too seldom and the process grew past 11 GB (the
OOM killer took the suite on a shared 24 GB box). A full collection runs after a test once the
resident size grew by :data:`COLLECT_AFTER_MB` since the last one (a few times per suite run)."""

from __future__ import annotations

import gc
import os

import pytest

COLLECT_AFTER_MB = 1_024
_last = {"rss": 0}


def resident_mb() -> int:
    """This process's resident set size (``VmRSS``), in MiB; 0 where /proc is not there."""
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    rss = resident_mb()
    if rss - _last["rss"] > COLLECT_AFTER_MB:
        gc.collect()
        _last["rss"] = resident_mb()
