"""`make bench` cannot rot silently: the benchmarks behind the README's figures run (tiny) and the
README block is rendered from what they wrote.

A benchmark is a script, so nothing else imports it: a rename in the library it instruments (the
search breakdown patched ``semantic.live_many`` long after that function was gone) fails only when
someone runs ``make bench``. Each script here runs in a subprocess on a tiny corpus into a private
results folder, and the figures it writes are checked for what they promise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import suite

ROOT = Path(__file__).resolve().parents[1]
# the stages every hybrid search passes through (the records fetch is a fallback and may be 0)
HYBRID_STAGES = (
    "query embedding (own thread, beside the stages)",
    "waiting for the query vector",
    "HNSW search + re-scoring",
    "version checks (Redis)",
    "BM25 scoring (mirror)",
    "liveness + records (Redis)",
)

BACKFILL_ROW = "HTTP back-fill (POST /api/memory/conversations, 32 sessions per POST)"


def _run_all(logs: Path, *runs: list[str]) -> None:
    """Run the scripts side by side (each in its own process under its own key prefix, as alone:
    the set-up's wall time is that of the slowest, not the sum); each must exit 0. Output goes to
    files: a full pipe would stall a script while the test waits on another."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, args in enumerate(runs):
            with (logs / f"{i}.out").open("wb") as out, (logs / f"{i}.err").open("wb") as err:
                procs.append(subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out, stderr=err))
        for i, (args, proc) in enumerate(zip(runs, procs, strict=True)):
            code = proc.wait(timeout=300)
            assert code == 0, (args, *((logs / f"{i}.{name}").read_text()[-3000:] for name in ("out", "err")))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Path:
    out = tmp_path_factory.mktemp("bench-results")
    cache = tmp_path_factory.mktemp("bench-cache")
    url = ["--redis-url", redis_url]
    recall = ["--sizes", "120", "--ingest-sample", "20", "--queries", "6", "--warmup", "2"]
    _run_all(
        tmp_path_factory.mktemp("bench-logs"),
        ["-m", "benchmarks.ingest", "--no-flow", "--sessions", "2", "--results-dir", str(out), *url],
        ["benchmarks/recall.py", *recall, "--results-dir", str(out), "--cache-dir", str(cache), *url],
        ["-m", "benchmarks.lint", "--sizes", "400", "--naive-size", "150", "--results-dir", str(out), *url],
    )
    return out


def _load(folder: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / name).read_text())
    return data


def test_search_breakdown_times_every_stage_a_hybrid_search_passes(results: Path) -> None:
    res = _load(results, "recall-120.json")
    hybrid = res["breakdown"]["hybrid"]
    for stage in HYBRID_STAGES:  # 0 ms: the wrapped function is no longer on the search path
        assert hybrid[stage] > 0, (stage, hybrid)
    assert res["breakdown"]["bm25"]["query embedding (own thread, beside the stages)"] == 0  # BM25 embeds nothing
    apart = ("total", "timed pass total (direct mean)", "query embedding (own thread, beside the stages)")
    for mode, stages in res["breakdown"].items():  # the calling thread's stages never overlap: other >= 0
        parts = sum(v for k, v in stages.items() if k not in apart)
        assert parts == pytest.approx(stages["total"], rel=1e-6), mode
        assert min(stages.values()) >= 0, (mode, stages)
    assert res["size"] == 120 and res["stamp"]["commit"]


def test_ingest_benchmark_saves_and_finds_every_session_and_its_stages_add_up(results: Path) -> None:
    res = _load(results, "ingest.json")
    assert res["sessions"] == 2
    http = res["paths"][0]
    assert http["saved"] == http["sessions"] == 2 and http["turns"] > 2
    assert sum(http["stages_wall"].values()) == pytest.approx(http["wall_s"], rel=0.02)
    assert res["baseline"]["turn_texts"] == http["turns"]  # the raw embedder ran on the same turns


def test_ingest_backfill_path_posts_the_sessions_to_the_public_route_and_times_its_stages(results: Path) -> None:
    paths = {p["name"]: p for p in _load(results, "ingest.json")["paths"]}
    fill = paths[BACKFILL_ROW]
    assert fill["saved"] == fill["sessions"] == 2  # stored by the route: not "unchanged", not skipped
    assert fill["searchable"] == "2 listed; 2/2 found by searching their summary"
    assert fill["turns"] == paths["batch in process (`coordinator.ingest`, 32 sessions per call)"]["turns"]
    assert fill["texts_embedded"] > fill["turns"]  # the turns, the episode's facts and entity names, counted
    stages = fill["stages_wall"]
    assert stages["embed"] > 0 and stages["recognise"] > 0  # the route's ingest ran the timed steps
    assert stages["HTTP request outside `coordinator.ingest` (validation, stored-id check, response)"] > 0
    assert sum(stages.values()) == pytest.approx(fill["wall_s"], rel=1e-6)
    assert "back-fill path: 1 POSTs (sessions per POST: 1×2;" in fill["note"]


def test_lint_benchmark_compares_pair_sets(results: Path) -> None:
    res = _load(results, "lint.json")
    assert res["pair_sets_equal"] is True and res["naive_pairs"] > 0
    assert [s["n"] for s in res["sizes"]] == [400]


def test_readme_block_renders_from_the_results(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite, "RESULTS", results)
    block = "\n".join(suite.readme_block())
    stamp = _load(results, "ingest.json")["stamp"]["date"]
    assert stamp in block and "2 sessions of convset.json" in block
    assert "| 400 |" in block  # the lint table's row
    assert f"| {BACKFILL_ROW} |" in block and "| 2 / 2 | 2 listed; 2/2 found" in block.split(BACKFILL_ROW)[1]
    assert "The batch path beside the HTTP back-fill, stage by stage (2 sessions each" in block
    served = next(p for p in _load(results, "ingest.json")["paths"] if p["name"].startswith("`agtos serve` itself"))
    # the path `agtos serve` ingests by is said apart from the inline one, with its own figure, measured on
    # `agtos serve` itself (its own process and worker child), not on the in-process worker thread
    assert (
        "**Under `agtos serve` (queue mode, what `make run` starts), one turn per POST: "
        f"{served['turns_per_s']:.1f} turns/s" in block
    )
    assert "measured on `agtos serve` itself" in block


def test_ingest_served_path_runs_agtos_serve_with_its_worker_child(results: Path) -> None:
    paths = {p["name"]: p for p in _load(results, "ingest.json")["paths"]}
    served = next(p for name, p in paths.items() if name.startswith("`agtos serve` itself"))
    assert served["saved"] == served["sessions"] == 2  # every session queued, ingested by the child, listed
    assert served["searchable"] == "2 listed; 2/2 found by searching their summary"
    assert served["texts_embedded"] is None and served["cpu_s"] > 0  # the server's CPU, counted in its processes
    assert sum(served["stages_wall"].values()) == pytest.approx(served["wall_s"], rel=1e-6)


def _mode(r1: float, r5: float, r10: float, mrr: float, update: float) -> dict[str, Any]:
    overall = {"recall_any@1": r1, "recall_any@5": r5, "recall_any@10": r10, "mrr": mrr}
    return {"overall": overall | {"update": {"accuracy": update}}, "by_type": {"temporal": {"recall_any@1": r1}}}


def test_default_mode_note_says_where_the_default_trails_leads_and_ties() -> None:
    modes = {"hybrid": _mode(0.75, 0.96, 0.976, 0.85, 0.85), "vector": _mode(0.79, 0.98, 0.976, 0.87, 0.80)}
    note = suite.default_mode_note(modes, "hybrid")[0]
    assert "vector 0.790 vs hybrid 0.750 on R@1" in note and "vector 0.980 vs hybrid 0.960 on R@5" in note
    assert "hybrid leads on update accuracy 0.850 vs 0.800" in note
    assert "the two tie on R@10" in note and "leads on R@10" not in note  # a tie is not a lead
    assert "temporal (R@1 +0.04)" in note
    best = {"hybrid": _mode(0.8, 0.9, 1.0, 0.9, 0.9), "vector": _mode(0.8, 0.9, 1.0, 0.9, 0.9)}
    assert "is the best (or tied) on every metric" in suite.default_mode_note(best, "hybrid")[0]
