"""Ingestion as a user's sessions go: turns appended → session end → searchable.

    python -m benchmarks.ingest [--sessions 332] [--batch 32] [--redis-url URL]

The sessions are the retrieval dev set's (``benchmarks/eval/devset.json``: 332 dated persona
conversations, greetings and small talk included, 1,272 turns), cycled with fresh user ids when
``--sessions`` asks for more. In one run, on one coordinator (models loaded and warmed first):

* **HTTP session API**: each turn ``POST /api/memory/sessions/{id}/turns`` (one turn per call, as
  an agent appends them), then ``POST .../end``: journal read → summarise + save heuristics →
  spaCy NER → distil facts → ONNX embedding → Redis indexes → entity graph → Dreamer rules. Every
  stage is the exclusive time of the library's own function, measured one after another (the
  path is sequential), so stages + "other" = the total; wall and process CPU are given apart;
* **batch, in process**: ``coordinator.ingest`` of the same sessions as turn items, ``--batch``
  sessions per call (summarise and save heuristics run in the pipeline's summarise step);
* **Prefect ingestion flow**: ``ingestion_flow`` (the same steps as Prefect tasks, on a local
  ephemeral server) on the same batches; the server's start-up is excluded, reported apart;
* **baseline**: the raw embedder's own throughput (texts/s) on exactly the texts the pipeline
  embedded, in the same run, so pipeline figures read as ratios to it on a busy machine.

After each path, outside the timing, every saved episode is checked to be listed and a sample
is searched for (hybrid, its own summary as the query): that is what "searchable" means here.
Writes ``benchmarks/results/ingest.json`` and ``.md``. Not a test.
"""

# ruff: noqa: I001 - benchmarks.recall first: it sets PREFECT_HOME and the import order agtos needs

from __future__ import annotations

import benchmarks.recall  # noqa: F401

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

import agtos.memory.coordinator as coordinator_module
from agtos.config import Settings
from agtos.flows.ingestion import ingestion_flow
from agtos.flows.runtime import use_runtime
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import IngestItem, Turn
from agtos.serving.app import create_app
from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.harness import DEFAULT_DATASET, agtos_session_id
from benchmarks.recall import (
    RESULTS_DIR,
    RUN_TMP,
    AsgiClient,
    Stopwatch,
    delete_prefix,
    log,
    patched,
    patched_module,
    timed_default_steps,
)
from benchmarks.stamp import Stamp

SEARCH_SAMPLE = 40  # saved episodes searched for after each path
STAGE_LABELS = {  # run_ingestion's steps (agtos/memory/ingestion_pipeline.py) as the README names them
    "summarise": "pipeline summarise step (a ready episode passes through)",
    "recognise": "spaCy NER",
    "distil": "distil facts",
    "embed": "ONNX embedding (episode + facts)",
    "index": "Redis record + BM25 + vector indexes",
    "entities": "entity graph (entity names embedded too)",
}


@dataclass(frozen=True)
class Session:
    user_id: str
    session_id: str
    turns: list[dict[str, str]]


def sessions(path: str, count: int, tag: str) -> list[Session]:
    """``count`` dev-set sessions in dataset order, the users renamed per pass and path (``tag``)."""
    data = load_dataset(path)
    one_pass = [
        (h.haystack_id, agtos_session_id(sid), [{"role": t.role, "content": t.content} for t in turns if t.content])
        for h in data.haystacks
        for sid, turns in zip(h.haystack_session_ids, h.haystack_sessions, strict=True)
    ]
    out = []
    for k in range(count):
        hid, sid, turns = one_pass[k % len(one_pass)]
        out.append(Session(f"bench-{tag}-{k // len(one_pass)}-{hid}", sid, turns))
    return out


@dataclass
class PathResult:
    name: str
    sessions: int = 0
    turns: int = 0
    saved: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    texts_embedded: int = 0
    stages_wall: dict[str, float] = field(default_factory=dict)
    stages_cpu: dict[str, float] = field(default_factory=dict)
    searchable: str = ""
    note: str = ""

    def public(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()}
        out["sessions_per_s"] = self.sessions / self.wall_s
        out["turns_per_s"] = self.turns / self.wall_s
        out["texts_per_s"] = self.texts_embedded / self.wall_s
        return out


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.prefix = f"agtos-bench-{uuid.uuid4().hex[:10]}"
        settings = Settings(
            redis_url=args.redis_url,
            key_prefix=self.prefix,
            data_dir=RUN_TMP / "data",
            config_dir=RUN_TMP / "config",
        )
        self.coord = MemoryCoordinator(settings)
        self.calls: list[list[str]] = []  # the embed calls of the last timed path (the baseline's input)

    def close(self) -> None:
        self.coord.close()
        log(f"deleted {delete_prefix(redis.Redis.from_url(self.args.redis_url), self.prefix)} keys")

    def warm_up(self) -> None:
        """Load the embedder and spaCy, and run one session end to end (not measured)."""
        item = IngestItem(
            user_id="bench-warmup",
            session_id="w1",
            turns=[Turn(role="user", content="Warm-up: Mia moved to Lisbon and prefers window seats.")],
        )
        self.coord.ingest([item])

    def http(self, todo: list[Session]) -> PathResult:
        """The session API, one turn per call, then /end: the real path of a live agent."""
        res = PathResult("HTTP session API (turns → /end), one session at a time")
        watch = Stopwatch()
        coord = self.coord
        turns_s = ends_s = 0.0
        cpu0 = time.process_time()
        with AsgiClient(create_app(coordinator=coord)) as client, self.timed_session_end(watch):
            for s in todo:
                headers = {"X-User-Id": s.user_id}
                for turn in s.turns:
                    t = time.perf_counter()
                    r = client.post(
                        f"/api/memory/sessions/{s.session_id}/turns", json={"turns": [turn]}, headers=headers
                    )
                    turns_s += time.perf_counter() - t
                    assert r.status_code == 200, r.text
                t = time.perf_counter()
                r = client.post(f"/api/memory/sessions/{s.session_id}/end", headers=headers)
                ends_s += time.perf_counter() - t
                assert r.status_code == 200, r.text
                res.saved += bool(r.json()["saved"])
                res.turns += len(s.turns)
            res.sessions = len(todo)
        res.cpu_s = time.process_time() - cpu0
        res.wall_s = turns_s + ends_s
        stages, cpu = watch.take(), watch.take_cpu()
        res.texts_embedded = sum(len(call) for call in self.calls)
        res.stages_wall = {"append turns (whole POST /turns requests)": turns_s, **stages}
        res.stages_wall["other (HTTP, session bookkeeping, glue)"] = ends_s - sum(stages.values())
        res.stages_cpu = cpu
        return res

    def batch(self, todo: list[Session]) -> PathResult:
        res = PathResult(f"batch in process (`coordinator.ingest`, {self.args.batch} sessions per call)")
        watch = Stopwatch()
        cpu0 = time.process_time()
        with self.timed_session_end(watch):
            for chunk in chunks(todo, self.args.batch):
                items = [IngestItem(user_id=s.user_id, session_id=s.session_id, turns=s.turns) for s in chunk]
                t = time.perf_counter()
                report = self.coord.ingest(items)
                res.wall_s += time.perf_counter() - t
                res.saved += report.stored
                res.sessions += len(chunk)
                res.turns += sum(len(s.turns) for s in chunk)
        res.cpu_s = time.process_time() - cpu0
        stages = watch.take()
        res.texts_embedded = sum(len(call) for call in self.calls)
        res.stages_wall = {**stages, "other (glue)": res.wall_s - sum(stages.values())}
        res.stages_cpu = watch.take_cpu()
        return res

    def flow(self, todo: list[Session]) -> PathResult:
        res = PathResult(f"Prefect ingestion flow (`ingestion_flow`, {self.args.batch} sessions per run)")
        use_runtime(self.coord.services)
        try:
            t = time.perf_counter()
            ingestion_flow([])  # starts the ephemeral Prefect server: not part of the figure
            res.note = f"ephemeral Prefect server start-up and a first empty run: {time.perf_counter() - t:.1f} s"
            texts = 0
            embed = self.coord.semantic.embedder.embed

            def counting(batch: list[str]) -> Any:
                nonlocal texts
                texts += len(batch)
                return embed(batch)

            cpu0 = time.process_time()
            with patched(self.coord.semantic.embedder, embed=counting):
                for chunk in chunks(todo, self.args.batch):
                    items = [{"user_id": s.user_id, "session_id": s.session_id, "turns": s.turns} for s in chunk]
                    t = time.perf_counter()
                    report = ingestion_flow(items)
                    res.wall_s += time.perf_counter() - t
                    res.saved += report["stored"]
                    res.sessions += len(chunk)
                    res.turns += sum(len(s.turns) for s in chunk)
            res.cpu_s = time.process_time() - cpu0
            res.texts_embedded = texts
        finally:
            use_runtime(None)
        return res

    def timed_session_end(self, watch: Stopwatch) -> Any:
        """Every stage of a session end, timed (exclusive): the pipeline steps, and around them
        the journal read, summarise + save heuristics and the Dreamer's rules."""
        coord, embed = self.coord, self.coord.semantic.embedder.embed

        def recording(texts: list[str]) -> Any:
            self.calls.append(list(texts))
            return embed(texts)

        self.calls = []
        stack = ExitStack()
        stack.enter_context(timed_default_steps(watch))
        stack.enter_context(patched(coord.semantic.embedder, embed=recording))
        stack.enter_context(patched(coord, _journal_turns=watch.wrap("journal read", coord._journal_turns)))
        stack.enter_context(
            patched(coord.dreamer, on_session_ended=watch.wrap("Dreamer (rules)", coord.dreamer.on_session_ended))
        )
        summarise = watch.wrap("summarise + save heuristics", coordinator_module.build_episode)
        stack.enter_context(patched_module(coordinator_module, build_episode=summarise))
        return stack

    def searchable(self, todo: list[Session], res: PathResult) -> None:
        """Outside the timing: every saved episode is listed, and a sample is found by search."""
        users = sorted({s.user_id for s in todo})
        episodes = [e for u in users for e in self.coord.list_episodes(u, 10_000)]
        if len(episodes) != res.saved:
            raise RuntimeError(f"{res.name}: {res.saved} saved but {len(episodes)} listed")
        sample = random.Random(7).sample(episodes, min(SEARCH_SAMPLE, len(episodes)))
        found = sum(
            e.id in [h.episode.id for h in self.coord.search_episodes(e.user_id, e.summary, 10)] for e in sample
        )
        res.searchable = f"{len(episodes)} listed; {found}/{len(sample)} found by searching their summary"

    def baseline(self, calls: list[list[str]]) -> dict[str, float]:
        """The raw embedder alone on the texts a path embedded: the same calls (one session's texts
        per call on the session path), then all of them in batches of 64 (the embedder's batch)."""
        embedder = self.coord.semantic.embedder
        texts = [t for call in calls for t in call]
        t = time.perf_counter()
        for call in calls:
            embedder.embed(call)
        same_calls = time.perf_counter() - t  # the session path's calls, as it made them
        t = time.perf_counter()
        for start in range(0, len(texts), 64):
            embedder.embed(texts[start : start + 64])
        batched = time.perf_counter() - t
        return {
            "texts": len(texts),
            "calls": len(calls),
            "same_calls_s": same_calls,
            "same_calls_texts_per_s": len(texts) / same_calls,
            "batched_texts_per_s": len(texts) / batched,
        }


def chunks(items: list[Session], size: int) -> Iterator[list[Session]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def render(results: dict[str, Any]) -> str:
    """Markdown of one run (kept in ingest.json too: ``make bench`` puts it in the README)."""
    st, base = results["stamp"], results["baseline"]
    lines = [
        f"{st['date']}, commit {st['commit']}, {st['machine']}, load average {st['load_start']} → {st['load_end']}",
        "",
        "| path | sessions/s | turns/s | texts embedded/s | saved / sessions | searchable |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in results["paths"]:
        lines.append(
            f"| {p['name']} | {p['sessions_per_s']:.1f} | {p['turns_per_s']:.1f} | {p['texts_per_s']:.1f} "
            f"| {p['saved']} / {p['sessions']} | {p['searchable']} |"
        )
    lines += [
        f"| raw embedder alone, the session path's {base['calls']} calls | — | — | "
        f"{base['same_calls_texts_per_s']:.1f} | — | — |",
        f"| raw embedder alone, same {base['texts']} texts in batches of 64 | — | — | "
        f"{base['batched_texts_per_s']:.1f} | — | — |",
        "",
    ]
    http = results["paths"][0]
    total = http["wall_s"]
    lines += [
        f"The HTTP path takes {total / base['same_calls_s']:.1f}× the time the embedder alone needs for the same "
        f"{base['calls']} calls: a session costs embedding plus the rest below.",
        "",
        f"Where a session's time goes on the HTTP path ({http['sessions']} sessions, {total:.1f} s wall, "
        f"{http['cpu_s']:.1f} s process CPU): stages in order, exclusive, measured one after another; "
        "stages + other = total.",
        "",
        "| stage | ms per session (wall) | share | CPU ms per session |",
        "|---|---:|---:|---:|",
    ]
    for name, secs in http["stages_wall"].items():
        cpu = http["stages_cpu"].get(name)
        lines.append(
            f"| {STAGE_LABELS.get(name, name)} | {secs / http['sessions'] * 1e3:.1f} | {secs / total:.0%} | "
            + (f"{cpu / http['sessions'] * 1e3:.1f}" if cpu is not None else "—")
            + " |"
        )
    lines.append(f"| **total** | **{total / http['sessions'] * 1e3:.1f}** | 100% | |")
    notes = [p["note"] for p in results["paths"] if p.get("note")]
    return "\n".join([*lines, "", *(f"- {n}" for n in notes), ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=332, help="sessions per path (the dev set has 332)")
    parser.add_argument("--batch", type=int, default=32, help="sessions per batch call / flow run")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--no-flow", action="store_true", help="skip the Prefect flow path")
    args = parser.parse_args(argv)
    stamp = Stamp()
    run = Run(args)
    try:
        run.warm_up()
        paths = []
        for tag, fn in (("http", run.http), ("batch", run.batch), ("flow", run.flow)):
            if tag == "flow" and args.no_flow:
                continue
            todo = sessions(args.dataset, args.sessions, tag)
            log(f"{tag}: {len(todo)} sessions")
            res = fn(todo)
            if tag == "http":
                http_calls = run.calls
            run.searchable(todo, res)
            log(f"  {res.sessions / res.wall_s:.1f} sessions/s, {res.turns / res.wall_s:.1f} turns/s; {res.searchable}")
            paths.append(res.public())
        log("baseline: the raw embedder on the session path's texts")
        base = run.baseline(http_calls)
    finally:
        run.close()
    results = {"sessions": args.sessions, "batch": args.batch, "paths": paths, "baseline": base, "stamp": stamp.done()}
    results["markdown"] = render(results)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.json").write_text(json.dumps(results, indent=1))
    text = f"## Ingestion through the real path ({args.sessions} dev-set sessions per path)\n\n{results['markdown']}"
    (out / "ingest.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
