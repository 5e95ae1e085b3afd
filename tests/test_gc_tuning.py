"""The API process's garbage collector: ``AGTOS_GC_FREEZE`` (on by default) and the pause recorder
``AGTOS_GC_STATS_DIR`` (agtos/serving/gc_tuning.py).

A real ``agtos serve`` process with the variables set answers requests and, when it stops, writes
what its collector did; in process, the app leaves the collector as it found it (a test process,
or anything embedding the app, goes on collecting what was alive while the app ran).
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.serving.app import create_app
from agtos.serving.gc_tuning import GcPauses, summarise
from tests.helpers import delete_prefix

PYTHON_DEFAULT_THRESHOLD = [700, 10, 10]  # CPython's documented gc.get_threshold() default


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """The test starts in a process where nothing is frozen, as ``agtos serve``'s does, and leaves the
    freeze it found. mutmut 3.8's fork server freezes its heap (``gc.freeze()``, 53,711 objects) before
    forking each mutant's test process: there the absolute counts below failed, unless the test that
    unfreezes everything at its end had run first (the order follows the measured durations, so it
    changed from run to run). Equivalent mutants whose tests reach the app (``waits_for_worker`` 13, 18,
    20) were reported killed, and passed on re-run."""
    frozen = gc.get_freeze_count() > 0
    if frozen:
        gc.unfreeze()
    yield
    if frozen:
        gc.freeze()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CASES = {  # id: (serve's environment, whether it freezes)
    "default-on": ({}, True),
    "off": ({"AGTOS_GC_FREEZE": "false"}, False),
    "on": ({"AGTOS_GC_FREEZE": "on"}, True),
}


def start_serve(tmp: Path, redis_url: str, prefix: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``agtos serve`` with ``env``, recording into ``tmp/gc``; the process and its URL."""
    port = free_port()
    full_env = {name: value for name, value in os.environ.items() if not name.startswith("AGTOS_GC_")}
    full_env |= {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": prefix,  # deleted after the tests
        "AGTOS_DATA_DIR": str(tmp / "data"),
        "AGTOS_CONFIG_DIR": str(tmp / "config"),
        "AGTOS_GC_STATS_DIR": str(tmp / "gc"),
        **env,
    }
    cmd = [sys.executable, "-m", "agtos.cli", "serve", "--port", str(port), "--no-worker"]
    with (tmp / "serve.log").open("wb") as out:
        proc = subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def store_and_search(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Once ``/health`` answers: store a memory and search for it."""
    user = {"X-User-Id": "gc-test"}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.3)
    memory = {"text": "User keeps a sourdough starter called Bubbles", "kind": "fact"}
    created = httpx.post(f"{url}/api/memory/memories", json=memory, headers=user, timeout=60)
    assert created.status_code in (200, 201), (created.text, log.read_text())
    found = httpx.get(f"{url}/api/memory/search", params={"q": "sourdough"}, headers=user, timeout=60)
    assert found.status_code == 200, found.text


@pytest.fixture(scope="module")
def gc_stats(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[dict[str, dict]]:
    """Each case's ``agtos serve`` (all started at once, each its own process, port, key prefix and
    folders: the start-ups overlap) stores and searches a memory and stops; its ``gc-<pid>.json``."""
    tmp = tmp_path_factory.mktemp("gc-serve")
    prefixes = {case: f"agtos-test-{uuid.uuid4().hex[:10]}" for case in CASES}
    started: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for case, (env, _frozen) in CASES.items():
            (tmp / case).mkdir()
            started[case] = start_serve(tmp / case, redis_url, prefixes[case], env)
        for case, (proc, url) in started.items():
            store_and_search(proc, url, tmp / case / "serve.log")
    finally:
        for proc, _url in started.values():
            proc.terminate()
        for proc, _url in started.values():
            proc.wait(timeout=60)
    stats = {}
    for case, (proc, _url) in started.items():
        files = list((tmp / case / "gc").glob("gc-*.json"))
        assert [f.name for f in files] == [f"gc-{proc.pid}.json"], (tmp / case / "serve.log").read_text()
        stats[case] = dict(json.loads(files[0].read_text()))
    yield stats
    for prefix in prefixes.values():
        delete_prefix(redis_url, prefix)


@pytest.mark.parametrize("case", CASES)
def test_serve_applies_the_gc_variables(gc_stats: dict[str, dict], case: str) -> None:
    data, frozen = gc_stats[case], CASES[case][1]
    assert data["freeze"] is frozen
    # the modules, routes and settings alive after start-up: many thousands of objects
    assert (data["frozen"] > 10_000) if frozen else (data["frozen"] == 0), data["frozen"]
    assert data["threshold"] == PYTHON_DEFAULT_THRESHOLD  # the freeze leaves the thresholds alone
    # the requests allocated: young collections happened and were timed
    gens = summarise(data["pauses"])
    assert gens[0]["count"] > 0 and 0 < gens[0]["max_ms"] < 10_000, gens
    if frozen:  # a full collection no longer traverses what was frozen
        assert data["tracked_at_start"] < data["frozen"], data


def test_the_app_restores_the_collector_when_it_stops(settings: Settings, nothing_frozen: None) -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(settings.with_overrides(gc_freeze=True))) as client:
        assert client.get("/health").status_code == 200
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0  # unfrozen: collectable again
    with TestClient(create_app(settings.with_overrides(gc_freeze=False))) as client:
        assert client.get("/health").status_code == 200
        assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_the_recorder_times_each_collection_by_generation() -> None:
    recorder = GcPauses().install()
    try:
        gc.collect(1)
        gc.collect(2)
    finally:
        recorder.uninstall()
    assert [gen for _end, gen, _s in recorder.pauses][-2:] == [1, 2]
    assert recorder not in gc.callbacks


def test_summarise_counts_totals_and_maxima_within_the_window() -> None:
    rows = [[10.0, 0, 1.0], [11.0, 0, 3.0], [12.0, 2, 40.0], [30.0, 2, 90.0], [5.0, 1, 7.0]]
    assert summarise(rows, 10.0, 20.0) == {
        0: {"count": 2, "total_ms": 4.0, "max_ms": 3.0},
        2: {"count": 1, "total_ms": 40.0, "max_ms": 40.0},
    }
    assert summarise(rows)[1] == {"count": 1, "total_ms": 7.0, "max_ms": 7.0}


# Planted-bug checks (issue 20, docs/testing.md "Planted bugs outside the mutation core"): what the
# served process writes, checked in process, and the recorder's and summary's edges.


@contextmanager
def no_automatic_collections() -> Iterator[None]:
    """Only the test's own ``gc.collect`` calls run (an automatic one would add a pause)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def test_the_recorder_keeps_the_newest_pauses_with_their_wall_clock_end_and_duration() -> None:
    recorder = GcPauses(keep=2).install()
    try:
        with no_automatic_collections():
            before = time.time()
            for generation in (0, 1, 2):
                gc.collect(generation)
            after = time.time()
    finally:
        recorder.uninstall()
    assert [gen for _end, gen, _s in recorder.pauses] == [1, 2]  # the oldest (generation 0) dropped
    for end, _gen, seconds in recorder.pauses:
        assert before <= end <= after  # wall-clock end time (time.time(), which the summary windows use)
        # the collection's own duration, not a clock reading: within the window the three collections took
        # (a fixed bound failed late in a full suite, whose heap made one collection 5.2 s)
        assert 0.0 < seconds <= after - before


def test_the_statistics_file_is_named_by_pid_in_ms_and_written_into_a_new_or_existing_directory(
    tmp_path: Path,
) -> None:
    recorder = GcPauses()
    recorder.pauses.append((1000.5, 2, 0.0125))
    nested = tmp_path / "a" / "b"  # parents created
    path = recorder.write(nested, freeze=True)
    assert path == nested / f"gc-{os.getpid()}.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "pid": os.getpid(),
        "freeze": True,
        "pauses": [[1000.5, 2, 12.5]],  # [end time, generation, ms]
    }
    assert recorder.write(nested, freeze=False) == path  # an existing directory (AGTOS_GC_STATS_DIR's usual case)
    assert json.loads(path.read_text(encoding="utf-8"))["freeze"] is False


def test_the_app_writes_its_statistics_and_removes_its_recorder_when_it_stops(
    settings: Settings, tmp_path: Path, nothing_frozen: None
) -> None:
    stats = tmp_path / "gc-stats"
    with TestClient(create_app(settings.with_overrides(gc_freeze=True, gc_stats_dir=stats))) as client:
        assert [c for c in gc.callbacks if isinstance(c, GcPauses)] != []
        for _ in range(3):
            assert client.get("/health").status_code == 200
        kept: list[list[int]] = [[] for _ in range(50_000)]  # tracked, alive when the app stops
        gc.collect(0)
    assert [c for c in gc.callbacks if isinstance(c, GcPauses)] == []
    assert gc.get_freeze_count() == 0
    data = json.loads((stats / f"gc-{os.getpid()}.json").read_text(encoding="utf-8"))
    assert data["pid"] == os.getpid() and data["freeze"] is True
    assert data["frozen"] > 10_000, data["frozen"]  # a test process holds far more than agtos serve
    assert data["threshold"] == list(gc.get_threshold())
    assert data["tracked_at_start"] < data["frozen"], data
    assert data["tracked_at_stop"] >= data["tracked_at_start"] + len(kept), data  # counted when it stopped
    assert summarise(data["pauses"])[0]["count"] >= 1  # the explicit young collection at least


def test_an_unwritable_statistics_directory_does_not_stop_the_app_from_stopping(
    settings: Settings, tmp_path: Path
) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("not a directory", encoding="utf-8")
    with TestClient(create_app(settings.with_overrides(gc_freeze=False, gc_stats_dir=occupied))) as client:
        assert client.get("/health").status_code == 200
    assert occupied.read_text(encoding="utf-8") == "not a directory"
    assert [c for c in gc.callbacks if isinstance(c, GcPauses)] == []


def test_the_app_leaves_a_freeze_made_before_it_in_place(settings: Settings, nothing_frozen: None) -> None:
    """Something embedding the app froze its own objects first: the app does not unfreeze them."""
    gc.freeze()
    try:
        frozen_before = gc.get_freeze_count()
        assert frozen_before > 0
        with TestClient(create_app(settings.with_overrides(gc_freeze=True))) as client:
            assert client.get("/health").status_code == 200
        assert gc.get_freeze_count() >= frozen_before
    finally:
        gc.unfreeze()


def test_summarise_includes_both_window_ends_and_sub_millisecond_pauses() -> None:
    rows = [[0.0, 0, 0.25], [10.0, 0, 0.5], [20.0, 0, 0.125], [20.001, 0, 9.0], [15.0, 2, 0.75]]
    assert summarise(rows, 10.0, 20.0) == {
        0: {"count": 2, "total_ms": 0.625, "max_ms": 0.5},
        2: {"count": 1, "total_ms": 0.75, "max_ms": 0.75},
    }
    assert summarise(rows)[0] == {"count": 4, "total_ms": 9.875, "max_ms": 9.0}  # the row at 0.0 included
    assert list(summarise(rows)) == [0, 2]  # by generation
