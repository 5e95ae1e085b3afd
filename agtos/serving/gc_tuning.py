"""CPython's cyclic garbage collector in a service process: tuning, and an opt-in pause recorder.

A collection stops every thread of the process (it runs under the GIL), so a long one is a stall of
the event loop and of every request in flight. :func:`tuned_gc` applies the settings for the
lifetime of the app and restores the collector's state after it:

- ``AGTOS_GC_FREEZE`` (default on): after start-up, ``gc.freeze()``: the objects alive then
  (modules, routes, pydantic schemas, settings; ~125,000 in ``agtos serve``) move to the permanent
  generation, which collections no longer traverse; they are still freed by reference counting,
  only cycles among them are not collected while the app runs (it unfreezes them when it stops).
- ``AGTOS_GC_STATS_DIR``: record every collection (``gc.callbacks``: its end time, generation and
  duration) and write them, with the settings in effect, to ``gc-<pid>.json`` in that directory
  when the app stops (``benchmarks.load --gc-stats`` reads them).
"""

from __future__ import annotations

import gc
import json
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_PAUSES = 500_000  # recorded collections kept (the newest); ~40 MB at most


class GcPauses:
    """Every collection of this process while installed: (end time, generation, seconds)."""

    def __init__(self, keep: int = MAX_PAUSES) -> None:
        self.pauses: deque[tuple[float, int, float]] = deque(maxlen=keep)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif phase == "stop":
            self.pauses.append((time.time(), int(info["generation"]), time.perf_counter() - self._started))

    def install(self) -> GcPauses:
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def write(self, directory: Path, **facts: Any) -> Path:
        """``gc-<pid>.json``: ``facts`` and the pauses as ``[end time, generation, ms]``."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"gc-{os.getpid()}.json"
        rows = [[round(end, 4), gen, round(s * 1e3, 4)] for end, gen, s in list(self.pauses)]
        path.write_text(json.dumps({"pid": os.getpid(), **facts, "pauses": rows}), encoding="utf-8")
        return path


def summarise(rows: list[list[float]], since: float = 0.0, until: float = float("inf")) -> dict[int, dict[str, float]]:
    """Per generation: count, total and max pause (ms) of the rows ``[end, generation, ms]`` that
    ended within [since, until]."""
    out: dict[int, dict[str, float]] = {}
    for end, gen, ms in rows:
        if since <= end <= until:
            s = out.setdefault(int(gen), {"count": 0, "total_ms": 0.0, "max_ms": 0.0})
            s["count"] += 1
            s["total_ms"] += ms
            s["max_ms"] = max(s["max_ms"], ms)
    return dict(sorted(out.items()))


@contextmanager
def tuned_gc(freeze: bool, stats_dir: Path | None = None) -> Iterator[GcPauses | None]:
    """The collector as configured for the block (the app's lifetime); its state before, after.

    The freeze happens on entry (call it once the app has loaded what it keeps). Yields the
    recorder when ``stats_dir`` is set."""
    recorder = GcPauses().install() if stats_dir is not None else None
    frozen_before = gc.get_freeze_count()
    if freeze:  # no collection first: start-up leaves next to no cyclic garbage (0 objects measured)
        gc.freeze()
    frozen = gc.get_freeze_count()
    tracked = len(gc.get_objects()) if recorder is not None else 0  # what a full collection traverses
    log.info("gc: %d objects frozen", frozen)
    try:
        yield recorder
    finally:
        if recorder is not None:
            recorder.uninstall()
            assert stats_dir is not None
            try:
                facts = {"freeze": freeze, "frozen": frozen, "threshold": list(gc.get_threshold())}
                recorder.write(stats_dir, **facts, tracked_at_start=tracked, tracked_at_stop=len(gc.get_objects()))
            except OSError:
                log.exception("gc: could not write the pause statistics to %s", stats_dir)
        if freeze and frozen_before == 0:
            gc.unfreeze()  # back to the oldest generation: collectable again (a test process goes on)
