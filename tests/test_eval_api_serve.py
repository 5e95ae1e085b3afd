"""`api_eval --serve` runs end to end against a real `agtos serve` (queue mode, worker child) and
stops it: the option that checks the served default path scores like the in-process one cannot rot."""

from __future__ import annotations

import json
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import redis

from benchmarks.eval import api_eval
from tests.test_eval_api import tiny_locomo


def test_serve_option_replays_through_agtos_serve_and_writes_its_json(redis_url: str, tmp_path: Path) -> None:
    data = tiny_locomo()
    data[0]["qa"] = data[0]["qa"][:2]  # the kitten and the job: two questions
    dataset = tmp_path / "tiny.json"
    dataset.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--serve", "--quiet", "--dataset", str(dataset), "--redis-url", redis_url, "--out-dir", str(out)]
    assert api_eval.main(argv) == 0

    results = json.loads((out / "api-eval-tiny.json").read_text(encoding="utf-8"))
    assert (out / "api-eval-tiny.md").read_text(encoding="utf-8").startswith("### tiny: 1 conversations, 3 sessions")
    served = results["settings"]["served"]
    # the requests went to `agtos serve` itself: queue mode, its worker a separate (child) process
    assert served["layout"] == "child"
    assert served["health"]["mode"] == "queue" and served["health"]["workerInProcess"] is False
    assert served["health"]["done"] + served["health"]["depth"] == 3  # all three ends went to the child
    assert len(served["pids"]) == 2  # `agtos serve` and its `agtos worker` child
    ing = results["ingestion"]
    assert ing["saved"] == 3 and sum(ing["end_status"].values()) == 3 and set(ing["end_status"]) <= {"done", "queued"}
    assert [q["question_id"] for q in results["questions"]] == ["tiny_q000", "tiny_q001"]
    for q in results["questions"]:  # every hit maps back to a dataset session, by session or episode id
        assert q["systems"]["agtos"]["ranked"] and not any(s.startswith("?") for s in q["systems"]["agtos"]["ranked"])
    if ing["end_status"] == {"done": 3}:  # a lone client's ends wait for their episodes (4 s at most)
        assert results["questions"][0]["systems"]["agtos"]["stored"] is True  # "Pumpernickel", in the export

    # the server and its worker child are gone, and the run's keys deleted
    assert not any(psutil.pid_exists(pid) for pid in served["pids"])
    assert not list(redis.Redis.from_url(redis_url).scan_iter(match=f"{served['key_prefix']}:*", count=1000))
