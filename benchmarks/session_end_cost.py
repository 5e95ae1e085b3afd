"""What a large session's end costs, by stage, and what it costs the ends read with it (issue 15).

    python -m benchmarks.session_end_cost [--cases a b c] [--queue-reps 1] [--redis-url redis://127.0.0.1:6379/6]

**Cost** (``--cases``): each case's turns are appended over HTTP (``POST …/turns``, 200 a request), then
``POST …/end`` in inline mode (the request runs the ingestion), on one coordinator whose models were
loaded and warmed by a small session first. Cases: ``a`` one 90 KB turn, ``b`` 200 turns of 2 KB,
``c`` 2 MiB in 2 KB turns (1,049: the journal's turn cap is 5,000), the text cut from
``benchmarks/eval/convset.json``'s chat lines. Every stage is timed exclusively (nested stages count
for the inner one: ``benchmarks.recall.Stopwatch``), so the stages and "other" add up to the end's wall
time; the embedder's model calls are counted with their real and padded tokens. Afterwards the turn's
last words are searched for (BM25 and vector): what "searchable" means here.

**Queue** (``--queue-reps``): queue mode, one 90 KB end queued first, then 8 small sessions (convset's),
all read by one worker pass; how long each end takes to be done (acknowledged, searchable), with the
batch as one ingestion run (before) and in runs of at most ``RUN_MAX_CHARS`` (``job_runs``, now),
alternated in the same process. Prints the figures and the load average; not a test.

2026-12-07, the shared 2-core box (one ONNX session, 2 threads), inline end: a 90 KB 50.3 s (load 7.7),
embedding 45.5 s (107 turn windows + 195 facts, 32,168 tokens, 1.9 % padding); b 400 KB 224.9 s (load 8.4),
embedding 212.4 s (600 windows + 208 facts); c 2 MiB 671.9 s (load 5.3 -> 8.7), embedding 640.1 s (3,147
windows + 256 facts, 672,468 tokens, 682 model calls), every other stage 2-8 s. Queue (load ~4.5): 8 small
ends read with a 90 KB one done after 35.0 / 29.2 s as one run, 2.9 / 2.7 s in runs (the large one 35.0 /
29.2 -> 23.5 / 30.9 s).
"""

# ruff: noqa: I001 - benchmarks.recall first: it sets PREFECT_HOME and the import order agtos needs

from __future__ import annotations

import benchmarks.recall  # noqa: F401

import argparse
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import redis

import agtos.memory.episodic as episodic_module
import agtos.memory.ingest_worker as worker_module
import agtos.memory.ingestion_pipeline as pipeline_module
import agtos.tasks.verbatim_turns as turns_module
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from benchmarks.ingest import dreamer_timed
from benchmarks.recall import (
    RUN_TMP,
    AsgiClient,
    Stopwatch,
    delete_prefix,
    patched,
    patched_module,
    timed_default_steps,
)

CONVSET = Path(__file__).resolve().parent / "eval" / "convset.json"
TURN_CHARS = 2_000
PER_POST = 200  # turns per POST /turns (the route's maximum)


def chat_lines() -> list[str]:
    """convset's chat lines in order (all sessions of all conversations)."""
    out: list[str] = []
    for sample in json.loads(CONVSET.read_text()):
        conv, n = sample["conversation"], 1
        while f"session_{n}" in conv:
            out += [t["text"] for t in conv[f"session_{n}"] if t["text"].strip()]
            n += 1
    return out


def cut_turns(lines: list[str], count: int, chars: int) -> list[dict[str, str]]:
    """``count`` turns of exactly ``chars`` characters of chat lines, user and assistant alternating;
    each pass over the lines in another order (seeded), so a long case repeats no turn (the pipeline
    embeds a repeated text once: repeats would halve case c's embedding)."""
    turns, at, order = [], 0, list(lines)
    for k in range(count):
        text = ""
        while len(text) < chars:
            if at and at % len(lines) == 0:
                random.Random(at // len(lines)).shuffle(order)
            text += order[at % len(lines)] + " "
            at += 1
        turns.append({"role": "user" if k % 2 == 0 else "assistant", "content": text[:chars]})
    return turns


def case_turns(name: str, lines: list[str]) -> list[dict[str, str]]:
    if name == "a":
        return cut_turns(lines, 1, 90_000)
    if name == "b":
        return cut_turns(lines, 200, TURN_CHARS)
    if name == "c":
        return cut_turns(lines, -(-2 * 1024 * 1024 // TURN_CHARS), TURN_CHARS)
    raise ValueError(f"unknown case {name!r}")


def small_sessions(lines: list[str], count: int) -> list[list[dict[str, str]]]:
    """``count`` chat sessions of 20 lines, each with a stated preference (so it is saved)."""
    out = []
    for k in range(count):
        said = [
            {"role": "user" if j % 2 == 0 else "assistant", "content": t} for j, t in enumerate(lines[k * 20 :][:20])
        ]
        out.append(
            [{"role": "user", "content": f"I prefer green tea in the morning, remember that (note {k})."}, *said]
        )
    return out


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


class EmbedCounter:
    """The embedder's model calls: how many, rows, real and padded tokens (wraps its ``_run``)."""

    def __init__(self) -> None:
        self.calls = self.rows = self.tokens = self.padded = 0

    def wrap(self, run: Any) -> Any:
        def counted(session: Any, encodings: Any) -> Any:
            self.calls += 1
            self.rows += len(encodings)
            self.tokens += sum(len(e.ids) for e in encodings)
            self.padded += len(encodings) * max(len(e.ids) for e in encodings)
            return run(session, encodings)

        return counted


@contextmanager
def timed_end(coord: MemoryCoordinator, watch: Stopwatch, counter: EmbedCounter, units: list[int]) -> Iterator[None]:
    """Every stage of an end timed (exclusive), the model calls counted, the turn units noted."""
    s = coord.services
    embedder = s.semantic.embedder
    turn_units = watch.wrap("turn units (windows, tokenizer)", turns_module.turn_units)

    def noted_units(turns: Any) -> Any:
        made = turn_units(turns)
        units.append(len(made))
        return made

    with ExitStack() as stack:
        stack.enter_context(timed_default_steps(watch))
        stack.enter_context(dreamer_timed(coord, watch))
        stack.enter_context(
            patched(coord.sessions, _session_turns=watch.wrap("journal read", coord.sessions._session_turns))
        )
        stack.enter_context(patched(s.summariser, summarise=watch.wrap("summary (extractive)", s.summariser.summarise)))
        stack.enter_context(
            patched_module(
                episodic_module,
                extract=watch.wrap("extract (facts, keywords, their dates)", episodic_module.extract),
                decide_save=watch.wrap("save decision (importance)", episodic_module.decide_save),
            )
        )
        stack.enter_context(
            patched_module(worker_module, build_episode=watch.wrap("build episode (rest)", worker_module.build_episode))
        )
        stack.enter_context(
            patched_module(
                worker_module, fill_after_ingestion=watch.wrap("vector fill", worker_module.fill_after_ingestion)
            )
        )
        stack.enter_context(
            patched_module(
                pipeline_module,
                batch_turns=watch.wrap("turn records (speakers, date resolution)", pipeline_module.batch_turns),
            )
        )
        stack.enter_context(patched_module(turns_module, turn_units=noted_units))
        if hasattr(embedder, "_run"):
            stack.enter_context(patched(embedder, _run=counter.wrap(embedder._run)))
        yield


STEP_NAMES = {
    "summarise": "summarise step (the episode is built before it)",
    "recognise": "NER (spaCy)",
    "distil": "distil facts",
    "embed": "embedding (model)",
    "index": "index (episode, memories, turn store)",
    "entities": "entity graph",
}


def cost(coord: MemoryCoordinator, client: AsgiClient, name: str, turns: list[dict[str, str]]) -> dict[str, Any]:
    who = {"X-User-Id": f"cost-{name}"}
    started = time.perf_counter()
    for at in range(0, len(turns), PER_POST):
        r = client.post(f"/api/memory/sessions/{name}/turns", json={"turns": turns[at : at + PER_POST]}, headers=who)
        assert r.status_code == 200, r.text
    appended = time.perf_counter() - started
    watch, counter, units = Stopwatch(), EmbedCounter(), list[int]()
    load_before = load()
    with timed_end(coord, watch, counter, units):
        t, c = time.perf_counter(), time.process_time()
        r = client.post(f"/api/memory/sessions/{name}/end", headers=who, timeout=None)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    assert r.status_code == 200 and r.json()["saved"], r.text
    stages = {STEP_NAMES.get(k, k): v for k, v in watch.take().items()}
    stages["other (HTTP, Redis bookkeeping, glue)"] = wall - sum(stages.values())
    tail = turns[-1]["content"][-60:]
    found = {
        mode: bool(client.get("/api/memory/search", params={"q": tail, "mode": mode}, headers=who).json()["results"])
        for mode in ("bm25", "vector")
    }
    return {
        "case": name,
        "turns": len(turns),
        "chars": sum(len(t["content"]) for t in turns),
        "append_s": appended,
        "end_s": wall,
        "end_cpu_s": cpu,
        "load": f"{load_before} -> {load()}",
        "texts_embedded": watch.texts,
        "turn_units": sum(units),
        "model_calls": counter.calls,
        "model_rows": counter.rows,
        "model_tokens": counter.tokens,
        "padded_tokens": counter.padded,
        "stages_s": dict(sorted(stages.items(), key=lambda kv: -kv[1])),
        "searchable_by_its_last_words": found,
    }


def queue_run(
    coord: MemoryCoordinator, client: AsgiClient, big: list[dict[str, str]], smalls: Any, planned: bool
) -> dict[str, Any]:
    """Queue the large end then the small ones over HTTP; one worker pass; each end's time to done."""
    tag = uuid.uuid4().hex[:6]
    ends = [(f"big-{tag}", big), *((f"small{k}-{tag}", s) for k, s in enumerate(smalls))]
    for session, turns in ends:
        who = {"X-User-Id": f"u-{session}"}
        for at in range(0, len(turns), PER_POST):
            r = client.post(
                f"/api/memory/sessions/{session}/turns", json={"turns": turns[at : at + PER_POST]}, headers=who
            )
            assert r.status_code == 200, r.text
        r = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=who)
        assert r.json()["status"] == "queued", r.text
    worker = coord.ingest_worker()
    if not planned:
        worker.plan = None  # the batch as one ingestion run (the worker before job_runs)
    done: dict[str, float] = {}
    many, one = worker.handle_many, worker.handle
    assert many is not None
    started = time.perf_counter()

    def timed_many(jobs: list[Any]) -> None:
        many(jobs)
        done.update({j.session_id: time.perf_counter() - started for j in jobs})

    def timed_one(job: Any) -> None:
        one(job)
        done[job.session_id] = time.perf_counter() - started

    worker.handle_many, worker.handle = timed_many, timed_one
    load_before = load()
    handled = worker.drain(timeout_s=7200)
    assert handled == len(ends), handled
    small = [done[s] for s, _ in ends[1:]]
    return {
        "runs": "job_runs (now)" if planned else "one run (before)",
        "large_end_done_s": done[ends[0][0]],
        "small_ends_done_s_median": statistics.median(small),
        "small_ends_done_s_max": max(small),
        "all_done_s": max(done.values()),
        "load": f"{load_before} -> {load()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=["a", "b"], choices=["a", "b", "c"])
    parser.add_argument("--queue-reps", type=int, default=1, help="alternated before/now pairs (0: none)")
    parser.add_argument("--small-ends", type=int, default=8)
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/6"))
    args = parser.parse_args(argv)
    lines = chat_lines()
    prefix = f"agtos-bench-{uuid.uuid4().hex[:10]}"
    base = Settings(
        redis_url=args.redis_url,
        key_prefix=prefix,
        data_dir=RUN_TMP / "data",
        config_dir=RUN_TMP / "config",
        session_max_bytes=8 * 1024 * 1024,  # case c is 2 MiB, past the 1 MiB default
    )
    coord = MemoryCoordinator(base)
    queued = MemoryCoordinator(base.with_overrides(ingest_mode="queue", ingest_worker=False))
    try:
        with AsgiClient(create_app(coordinator=coord)) as client, AsgiClient(create_app(coordinator=queued)) as qclient:
            warm = small_sessions(lines, 1)[0]
            client.post("/api/memory/sessions/warm/turns", json={"turns": warm}, headers={"X-User-Id": "warm"})
            assert client.post("/api/memory/sessions/warm/end", headers={"X-User-Id": "warm"}).json()["saved"]
            queued.services.warm_models()
            for name in args.cases:
                print(json.dumps(cost(coord, client, name, case_turns(name, lines)), indent=1), flush=True)
            big, smalls = case_turns("a", lines), small_sessions(lines[200:], args.small_ends)
            for _ in range(args.queue_reps):
                for planned in (False, True):
                    print(json.dumps(queue_run(queued, qclient, big, smalls, planned)), flush=True)
    finally:
        queued.close()
        coord.close()
        delete_prefix(redis.Redis.from_url(args.redis_url), prefix)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
