"""Ingestion as a user's sessions go: turns appended → session end → searchable, in turns/s beside
the raw embedder's own turns/s on the same turn texts, measured in the same run.

    python -m benchmarks.ingest [--dataset PATH] [--sessions N] [--batch 32] [--no-flow]

The sessions are a dataset's (default ``benchmarks/eval/convset.json``: long dated chats between
two named people, greetings and small talk included; any ``load_dataset`` shape works), each turn
with its speaker name and timestamp, cycled with fresh user ids when ``--sessions`` asks for more
than one pass. In one run, on one coordinator (models loaded and warmed first):

* **HTTP session API**: each turn ``POST /api/memory/sessions/{id}/turns`` (one turn per call, as
  an agent appends them), then ``POST .../end``: journal read → summarise + save heuristics →
  spaCy NER → distil facts → turn records (speakers, resolved dates, windows) → one embedding
  call (episode + facts + turns) → Redis episode/memory indexes → verbatim turn store and turn
  indexes → entity graph → Dreamer rules. Every stage is the exclusive time of the library's own
  function, measured one after another (the path is sequential), so stages + "other" = the total;
  wall and process CPU are given apart;
* **HTTP session API, queue mode** (the default of ``agtos serve``): the same requests, /end only
  queues the session (``?wait=0``: without it a lone client's end waits for its episode); the
  API's worker thread ingests what is queued (up to ``BATCH_JOBS`` session ends per run, the
  Dreamer once per user and run) beside the client's requests; timed from the first POST until
  the queue is empty. Reported: wall per part, the worker's run sizes;
* **``agtos serve`` itself** (what ``make run`` starts): its own process with its ingestion worker
  child (``SCHED_IDLE``), started by ``benchmarks.load.start_server`` on this Redis and key prefix;
  this process is the client over loopback HTTP, one turn per POST, then ``/end?wait=0``; timed
  from the first POST until the queue is empty; CPU is the server's processes' (API + worker
  child), the client's apart. Texts embedded are not counted there (another process);
* **batch, in process**: ``coordinator.ingest`` of the same sessions as turn items, ``--batch``
  sessions per call (summarise and save heuristics run in the pipeline's summarise step);
* **HTTP back-fill**: the public batch route ``POST /api/memory/conversations`` (``{"sessions":
  [{id, turns}]}``, each turn dated and named), up to ``--batch`` sessions of one user per POST
  (the route takes one ``X-User-Id``); the same stages as the batch path, plus the time a request
  spends outside ``coordinator.ingest`` (HTTP, validation, the check for stored session ids);
* **Prefect ingestion flow**: ``ingestion_flow`` (the same steps as Prefect tasks, on a local
  ephemeral server) on the same batches; the server's start-up is excluded, reported apart;
* **raw embedder**, right after the HTTP path: the bundled embedder alone on exactly the turn
  texts the HTTP path indexed (one call per session, as the pipeline makes them, and all in one
  call) → the raw turns/s the pipeline is compared with (target: ≥ 70 %); and every text the path
  embedded, in its own calls and in calls of 64, each once with length buckets (the embedder
  today) and once padded to the longest text of 64 (the embedder before length buckets).

After each path, outside the timing, every saved episode is checked to be listed and a sample
is searched for (hybrid, its own summary as the query): that is what "searchable" means here.
``--padded`` runs it all with the embedder as it was before length buckets; ``--sweep`` instead
times the embedder's bucket settings on the texts the pipeline embeds (how
``DEFAULT_BATCH_TEXTS`` / ``DEFAULT_BATCH_TOKENS`` were picked). Writes
``benchmarks/results/ingest.json`` and ``.md``. Not a test.
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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

import httpx
import redis

import agtos.memory.ingest_worker as ingest_worker_module
import agtos.memory.ingestion_pipeline as pipeline_module
from agtos.config import Settings
from agtos.flows.ingestion_flow import ingestion_flow
from agtos.flows.runtime import use_runtime
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.live_sessions import SESSION_ENDED
from agtos.providers.embeddings import MINILM_MAX_TOKENS
from agtos.schemas import IngestItem, Turn
from agtos.serving.app import create_app
from benchmarks.eval.api_eval import turn_timestamps
from benchmarks.eval.dataset import load_dataset
from benchmarks.eval.harness import REPO, agtos_session_id
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
from benchmarks.load import cpu_seconds, start_server
from benchmarks.stamp import Stamp

DEFAULT_DATASET = REPO / "benchmarks" / "eval" / "convset.json"
SEARCH_SAMPLE = 40  # saved episodes searched for after each path
PADDED = {"batch_size": 64, "batch_tokens": 64 * MINILM_MAX_TOKENS}  # the embedder before length buckets
PADDED_SAMPLE = 8  # calls timed padded and bucketed (padded is ~10x slower: not all of them)
SWEEP = [(1, 1 << 20), (8, 1 << 20), (16, 1 << 20), (64, 1 << 20), (8, 1024), (16, 1024), (16, 2048), (32, 4096)]
BACKFILL = "HTTP back-fill (POST /api/memory/conversations,"  # the path's name, before its batch size
QUEUED = "HTTP session API, queue mode"  # the in-process queue paths' names begin so
SERVED = "`agtos serve` itself (its own process + worker child, as `make run`), one turn per POST over loopback HTTP"
OUTSIDE_INGEST = "HTTP request outside `coordinator.ingest` (validation, stored-id check, response)"
STAGE_LABELS = {  # run_ingestion's steps (agtos/memory/ingestion_pipeline.py) as the README names them
    "summarise": "pipeline summarise step (a ready episode passes through)",
    "recognise": "spaCy NER",
    "distil": "distil facts",
    "turn records": "turn records (speakers, resolved dates, token windows)",
    "embed": "ONNX embedding (episode + facts + turns, one call)",
    "index": "Redis episode/memory record + BM25 + vector indexes",
    "turn store": "verbatim turn store + turn BM25 + vector indexes",
    "entities": "entity graph (entity names embedded too)",
    "Dreamer (rules)": "Dreamer rules (conclusions of the last 50 episodes, the new ones embedded, profile)",
}


@dataclass(frozen=True)
class Session:
    user_id: str
    session_id: str
    turns: list[dict[str, Any]]

    def typed_turns(self) -> list[Turn]:
        return [Turn.model_validate(t) for t in self.turns]


Send = Callable[[list[Session], Any], int]  # a group of sessions and its payload → sessions stored


def sessions(path: str, count: int | None, tag: str) -> list[Session]:
    """``count`` (default: all) sessions in dataset order, each turn with its speaker name and
    timestamp, the users renamed per pass and path (``tag``)."""
    data = load_dataset(path)
    one_pass = []
    for h in data.haystacks:
        for sid, turns, stamps in zip(h.haystack_session_ids, h.haystack_sessions, turn_timestamps(h), strict=True):
            said = [
                {"role": t.role, "content": t.content, "timestamp": ts} | ({"name": t.name} if t.name else {})
                for t, ts in zip(turns, stamps, strict=True)
                if t.content.strip()
            ]
            one_pass.append((h.haystack_id, agtos_session_id(sid), said))
    out = []
    for k in range(len(one_pass) if count is None else count):
        hid, sid, said = one_pass[k % len(one_pass)]
        out.append(Session(f"bench-{tag}-{k // len(one_pass)}-{hid}", sid, said))
    return out


@dataclass
class PathResult:
    name: str
    sessions: int = 0
    turns: int = 0
    saved: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    texts_embedded: int | None = 0  # None: embedded in another process, not counted
    stages_wall: dict[str, float] = field(default_factory=dict)
    stages_cpu: dict[str, float] = field(default_factory=dict)
    searchable: str = ""
    note: str = ""
    raw: dict[str, float] = field(default_factory=dict)  # the embedder alone, timed after each session end

    def public(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()}
        out["sessions_per_s"] = self.sessions / self.wall_s
        out["turns_per_s"] = self.turns / self.wall_s
        out["texts_per_s"] = None if self.texts_embedded is None else self.texts_embedded / self.wall_s
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
        self.queued: MemoryCoordinator | None = None  # queue mode, its worker thread (the queue path)
        self.calls: list[list[str]] = []  # the embed calls of the last timed path (the baseline's input)
        self.turn_calls: list[list[str]] = []  # its turn-unit texts, one list per turn store call
        self.turn_counts: list[int] = []  # and the turns each of those calls stored
        self.embed = self.coord.semantic.embedder.embed  # the embedder itself, never patched

    def close(self) -> None:
        if self.queued is not None:
            self.queued.close()
        self.coord.close()
        log(f"deleted {delete_prefix(redis.Redis.from_url(self.args.redis_url), self.prefix)} keys")

    def warm_up(self, session: Session) -> None:
        """Load the embedder and spaCy, and run one of the dataset's sessions end to end through the
        session path (its Dreamer too) and one batch, under a user of their own (not measured). A
        one-turn session is not saved, so it left spaCy to load inside the first timed session end."""
        turns = session.typed_turns()
        self.coord.ingest([IngestItem(user_id="bench-warmup", session_id="w1", turns=turns)])
        self.coord.add_turns("bench-warmup", "w2", turns)
        if not self.coord.end_session("bench-warmup", "w2").saved:
            raise RuntimeError("the warm-up session was not saved: spaCy and the Dreamer would load in the timing")

    def http(self, todo: list[Session]) -> PathResult:
        """The session API, one turn per call, then /end: the real path of a live agent. After each
        session end (outside its timing) the raw embedder embeds the same session's turn texts, and
        every text the end embedded, in the same calls: paired under the same load of the host."""
        res = PathResult("HTTP session API (turns → /end), one session at a time")
        res.raw = dict.fromkeys(("turns_s", "turns_cpu_s", "texts_s", "texts_cpu_s"), 0.0)
        watch = Stopwatch()
        coord = self.coord
        turns_s = ends_s = 0.0
        cpu0 = time.process_time()
        with AsgiClient(create_app(coordinator=coord)) as client, self.timed_session_end(watch):
            for s in todo:
                headers = {"X-User-Id": s.user_id}
                turns_s += post_turns(client, s, headers)
                calls, turn_calls = len(self.calls), len(self.turn_calls)
                t = time.perf_counter()
                r = client.post(f"/api/memory/sessions/{s.session_id}/end", headers=headers)
                ends_s += time.perf_counter() - t
                assert r.status_code == 200, r.text
                for key, groups in (("turns", self.turn_calls[turn_calls:]), ("texts", self.calls[calls:])):
                    wall, cpu = self.timed(groups)
                    res.raw[f"{key}_s"] += wall
                    res.raw[f"{key}_cpu_s"] += cpu
                res.saved += bool(r.json()["saved"])
                res.turns += len(s.turns)
            res.sessions = len(todo)
        res.cpu_s = time.process_time() - cpu0 - res.raw["turns_cpu_s"] - res.raw["texts_cpu_s"]
        res.raw["turns_stored"] = sum(self.turn_counts)
        res.wall_s = turns_s + ends_s
        stages = watch.take()
        res.texts_embedded = sum(len(call) for call in self.calls)
        res.stages_wall = {"append turns (whole POST /turns requests)": turns_s, **stages}
        res.stages_wall["other (HTTP, session bookkeeping, glue)"] = ends_s - sum(stages.values())
        res.stages_cpu = watch.take_cpu()
        return res

    def queue(self, todo: list[Session], per_post: int = 1) -> PathResult:
        """The session API in queue mode (the default of ``agtos serve``): each turn POSTed, then
        /end, which queues the session; the API's worker thread takes what is queued (up to
        ``BATCH_JOBS`` session ends per ingestion run) while the client goes on. Timed from the first
        POST until the queue is empty (every job done: nothing left to make searchable); the
        client's requests and the worker share the process's cores, as under ``agtos serve``.
        ``per_post``: turns per POST /turns (0: all of a session's turns in one request)."""
        res = PathResult(
            "HTTP session API, queue mode (turns → /end → queue → worker thread), "
            + ("one turn per POST" if per_post == 1 else "a session's turns in one POST")
        )
        if self.queued is None:
            coord = self.queued = MemoryCoordinator(self.coord.settings.with_overrides(ingest_mode="queue"))
            warm = sessions(self.args.dataset, 1, "queue-warmup")[0]
            coord.add_turns(warm.user_id, warm.session_id, warm.typed_turns())
            coord.end_session(warm.user_id, warm.session_id)
            coord.ingest_worker().drain()  # its models loaded and warm, outside the timing
        coord = self.queued
        sizes: list[int] = []
        many, one = getattr(coord.sessions, "ingest_jobs", None), coord.sessions.ingest_job  # (a worker
        # before batches had no ingest_jobs: its runs are then all of one job)

        def counted_many(jobs: list[Any]) -> None:
            sizes.append(len(jobs))
            assert many is not None
            many(jobs)

        def counted_one(job: Any) -> None:
            sizes.append(1)
            one(job)

        embed, texts = coord.semantic.embedder.embed, [0]

        def counting(batch: list[str]) -> Any:
            texts[0] += len(batch)
            return embed(batch)

        turns_s = ends_s = 0.0
        with (
            patched(coord.sessions, ingest_jobs=counted_many, ingest_job=counted_one),
            patched(coord.semantic.embedder, embed=counting),
        ):
            coord.start_ingest_worker()
            try:
                with AsgiClient(create_app(coordinator=coord)) as client:
                    cpu0, start = time.process_time(), time.perf_counter()
                    for s in todo:
                        headers = {"X-User-Id": s.user_id}
                        step = per_post or len(s.turns)
                        for at in range(0, len(s.turns), step):
                            t = time.perf_counter()
                            url = f"/api/memory/sessions/{s.session_id}/turns"
                            r = client.post(url, json={"turns": s.turns[at : at + step]}, headers=headers)
                            turns_s += time.perf_counter() - t
                            assert r.status_code == 200, r.text
                        t = time.perf_counter()
                        # ?wait=0: the queued answer at once (a lone client's end without it waits
                        # for its own episode: AGTOS_END_IDLE_WAIT_S), so the worker batches the ends
                        url = f"/api/memory/sessions/{s.session_id}/end"
                        r = client.post(url, params={"wait": 0}, headers=headers)
                        ends_s += time.perf_counter() - t
                        assert r.status_code == 200 and r.json()["status"] == "queued", r.text
                        res.saved += bool(r.json()["saved"])
                        res.turns += len(s.turns)
                    client_s = time.perf_counter() - start
                    # a stats() call costs ~0.1 ms of this process's CPU: polled every 10 ms, that was 1-2 % of
                    # the path's CPU when the queue empties 20-50 s after the last end; every 50 ms, 0.2-0.4 %
                    while (stats := coord.ingest_queue.stats())["depth"]:
                        time.sleep(0.05)
                    res.wall_s = time.perf_counter() - start
                    res.cpu_s = time.process_time() - cpu0
            finally:
                coord.stop_ingest_worker()
        if stats["deadLetters"]:
            raise RuntimeError(f"{res.name}: {stats['deadLetters']} jobs dead-lettered")
        res.sessions, res.texts_embedded = len(todo), texts[0]
        res.stages_wall = {
            "append turns (whole POST /turns requests, the worker running beside them)": turns_s,
            "POST /end (the session queued)": ends_s,
            "waiting for the queue to empty after the last /end": res.wall_s - client_s,
        }
        res.stages_wall["other (client loop)"] = client_s - turns_s - ends_s
        per = "one turn" if per_post == 1 else "a session"
        res.note = (
            f"queue path, {per} per POST: {len(sizes)} ingestion runs for {sum(sizes)} session ends (sizes: "
            f"{', '.join(f'{n}×{k}' for k, n in sorted(Counter(sizes).items()))}); the queue empty "
            f"{res.wall_s - client_s:.1f} s after the client's last /end"
        )
        return res

    def served(self, todo: list[Session]) -> PathResult:
        """``agtos serve`` as ``make run`` starts it (its own process, the ingestion worker its child at
        ``SCHED_IDLE``), this process the client over loopback HTTP: each turn POSTed, then
        ``/end?wait=0``; timed from the first POST until the queue is empty. CPU: the server's
        processes only (the client's is reported apart)."""
        res = PathResult(SERVED, texts_embedded=None)
        server = start_server(self.args.redis_url, self.prefix, RUN_TMP / "served", layout="child")
        try:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                warm = sessions(self.args.dataset, 1, "served-warmup")[0]  # the child's models loaded, not timed
                client.post(
                    f"/api/memory/sessions/{warm.session_id}/turns",
                    json={"turns": warm.turns},
                    headers={"X-User-Id": warm.user_id},
                ).raise_for_status()
                r = client.post(
                    f"/api/memory/sessions/{warm.session_id}/end",
                    params={"wait": 60},
                    headers={"X-User-Id": warm.user_id},
                )
                if r.status_code != 200 or r.json()["status"] != "done":
                    raise RuntimeError(f"{SERVED}: the warm-up session was not ingested: {r.text[:300]}")
                turns_s = ends_s = 0.0
                cpu0, client_cpu0, start = cpu_seconds(*server.pids), time.process_time(), time.perf_counter()
                for s in todo:
                    headers = {"X-User-Id": s.user_id}
                    turns_s += post_turns(client, s, headers)
                    t = time.perf_counter()
                    r = client.post(f"/api/memory/sessions/{s.session_id}/end", params={"wait": 0}, headers=headers)
                    ends_s += time.perf_counter() - t
                    assert r.status_code == 200 and r.json()["status"] == "queued", r.text
                    res.saved += bool(r.json()["saved"])
                    res.turns += len(s.turns)
                client_s, client_cpu = time.perf_counter() - start, time.process_time() - client_cpu0
                # the queue's depth read from Redis here: polling /health would add to the server's CPU
                while (stats := self.coord.ingest_queue.stats())["depth"]:
                    time.sleep(0.05)
                res.wall_s = time.perf_counter() - start
                res.cpu_s = cpu_seconds(*server.pids) - cpu0
        finally:
            server.stop()
        if stats["deadLetters"]:
            raise RuntimeError(f"{res.name}: {stats['deadLetters']} jobs dead-lettered")
        res.sessions = len(todo)
        res.stages_wall = {
            "append turns (whole POST /turns requests over loopback, the worker child running beside them)": turns_s,
            "POST /end (the session queued)": ends_s,
            "waiting for the queue to empty after the last /end": res.wall_s - client_s,
            "other (client loop)": client_s - turns_s - ends_s,
        }
        res.note = (
            f"`agtos serve` path: the queue empty {res.wall_s - client_s:.1f} s after the client's last /end; the "
            f"server's processes used {res.cpu_s:.1f} s of CPU, the client (this process, httpx) {client_cpu:.1f} s"
        )
        return res

    def batch(self, todo: list[Session]) -> PathResult:
        """``coordinator.ingest`` in process, ``--batch`` sessions per call (users mixed in a call)."""
        res = PathResult(f"batch in process (`coordinator.ingest`, {self.args.batch} sessions per call)")
        groups = [
            (chunk, [IngestItem(user_id=s.user_id, session_id=s.session_id, turns=s.typed_turns()) for s in chunk])
            for chunk in chunks(todo, self.args.batch)
        ]
        return self.batched(res, groups, lambda _, items: self.coord.ingest(items).stored)

    def backfill(self, todo: list[Session]) -> PathResult:
        """The public back-fill route, ``POST /api/memory/conversations``: up to ``--batch`` sessions
        of one user per request (the route takes one ``X-User-Id``), each turn dated and named."""
        res = PathResult(f"{BACKFILL} {self.args.batch} sessions per POST)")
        groups = [
            (chunk, {"sessions": [{"id": s.session_id, "turns": s.turns} for s in chunk]})
            for _, mine in groupby(todo, key=lambda s: s.user_id)
            for chunk in chunks(list(mine), self.args.batch)
        ]
        with AsgiClient(create_app(coordinator=self.coord)) as client:

            def post(chunk: list[Session], body: dict[str, Any]) -> int:
                headers = {"X-User-Id": chunk[0].user_id}
                r = client.post("/api/memory/conversations", json=body, headers=headers)
                assert r.status_code == 200, r.text
                return int(r.json()["stored"])

            res = self.batched(res, groups, post, outside=OUTSIDE_INGEST)
        sizes = Counter(len(chunk) for chunk, _ in groups)
        res.note = (
            f"back-fill path: {len(groups)} POSTs (sessions per POST: "
            f"{', '.join(f'{n}×{k}' for k, n in sorted(sizes.items()))}; one user per POST, where the "
            "batch path's calls mix users)"
        )
        return res

    def batched(
        self, res: PathResult, groups: list[tuple[list[Session], Any]], send: Send, outside: str = ""
    ) -> PathResult:
        """Each group's payload (built before the timing) sent in one timed call that returns the
        sessions stored; stages as on the session end, "other (glue)" = the rest of
        ``coordinator.ingest``, and the time outside it (``outside``: a request's HTTP, validation,
        check for stored session ids and response) as a stage of its own."""
        watch, inside = Stopwatch(), [0.0]
        ingest = self.coord.ingest

        def timed_ingest(items: list[IngestItem]) -> Any:
            t = time.perf_counter()
            try:
                return ingest(items)
            finally:
                inside[0] += time.perf_counter() - t

        cpu0 = time.process_time()
        with self.timed_session_end(watch), patched(self.coord, ingest=timed_ingest):
            for chunk, payload in groups:
                t = time.perf_counter()
                res.saved += send(chunk, payload)
                res.wall_s += time.perf_counter() - t
                res.sessions += len(chunk)
                res.turns += sum(len(s.turns) for s in chunk)
        res.cpu_s = time.process_time() - cpu0
        stages = watch.take()
        res.texts_embedded = sum(len(call) for call in self.calls)
        res.stages_wall = {**stages, "other (glue)": inside[0] - sum(stages.values())}
        if outside:
            res.stages_wall[outside] = res.wall_s - inside[0]
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
        the journal read, summarise + save heuristics, the turn records, the turn store and the
        Dreamer's rules. Records the embed calls and the turn texts stored (the baseline's input)."""
        coord, embed = self.coord, self.coord.semantic.embedder.embed
        turn_store = coord.semantic.turns
        save_turns = watch.wrap("turn store", turn_store.save)

        def recording(texts: list[str]) -> Any:
            self.calls.append(list(texts))
            return embed(texts)

        def recording_turns(turns: Any, units: Any, vectors: Any) -> int:
            self.turn_calls.append([u.text for u in units])
            self.turn_counts.append(len(turns))
            return int(save_turns(turns, units, vectors))

        self.calls, self.turn_calls, self.turn_counts = [], [], []
        stack = ExitStack()
        stack.enter_context(timed_default_steps(watch))
        stack.enter_context(patched(coord.semantic.embedder, embed=recording))
        stack.enter_context(patched(turn_store, save=recording_turns))
        stack.enter_context(
            patched(coord.sessions, _session_turns=watch.wrap("journal read", coord.sessions._session_turns))
        )
        stack.enter_context(dreamer_timed(coord, watch))
        summarise = watch.wrap("summarise + save heuristics", ingest_worker_module.build_episode)
        stack.enter_context(patched_module(ingest_worker_module, build_episode=summarise))
        records = watch.wrap("turn records", pipeline_module.batch_turns)
        stack.enter_context(patched_module(pipeline_module, batch_turns=records))
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

    def timed(self, groups: list[list[str]]) -> tuple[float, float]:
        """Wall and process CPU seconds of the raw embedder on ``groups``, one call each."""
        t, c = time.perf_counter(), time.process_time()
        for group in groups:
            self.embed(group)
        return time.perf_counter() - t, time.process_time() - c

    def baseline(self, calls: list[list[str]], turn_calls: list[list[str]]) -> dict[str, Any]:
        """The raw embedder alone after a path: its turn texts in one call, and a sample of its
        calls (as made, and cut into calls of 64) with length buckets and padded to the longest."""
        embedder = self.coord.semantic.embedder
        out: dict[str, Any] = {"turn_texts": sum(len(call) for call in turn_calls), "calls": len(calls)}
        out["turns_one_call_s"], out["turns_one_call_cpu_s"] = self.timed([[t for c in turn_calls for t in c]])
        sample = calls[:PADDED_SAMPLE]
        texts = [t for call in sample for t in call]
        of_64 = [texts[i : i + 64] for i in range(0, len(texts), 64)]
        out["sample_calls"], out["sample_texts"] = len(sample), len(texts)
        out["same_calls_s"], _ = self.timed(sample)
        out["of_64_s"], _ = self.timed(of_64)
        with patched(embedder, **PADDED):
            out["padded_same_calls_s"], _ = self.timed(sample)
            out["padded_of_64_s"], _ = self.timed(of_64)
        return out


def sweep(run: Run, todo: list[Session]) -> list[dict[str, float]]:
    """The embedder's bucket settings, timed on the texts the batch path embeds (best of 3,
    settings interleaved so a change in the host's load hits them all)."""
    run.batch(todo)
    texts = [t for call in run.calls for t in call]
    random.Random(3).shuffle(texts)
    embedder = run.coord.semantic.embedder
    best: dict[tuple[int, int], list[float]] = {c: [float("inf"), float("inf")] for c in SWEEP}
    for _ in range(3):
        for size, tokens in SWEEP:
            with patched(embedder, batch_size=size, batch_tokens=tokens):
                t, c = time.perf_counter(), time.process_time()
                embedder.embed(texts)
                wall, cpu = time.perf_counter() - t, time.process_time() - c
            best[size, tokens] = [min(best[size, tokens][0], wall), min(best[size, tokens][1], cpu)]
    rows = [
        {"batch_texts": s, "batch_tokens": k, "texts_per_s": len(texts) / w, "texts_per_cpu_s": len(texts) / c}
        for (s, k), (w, c) in best.items()
    ]
    for r in rows:
        log(
            f"  ≤{r['batch_texts']} texts, ≤{r['batch_tokens']} tokens: {r['texts_per_s']:.1f} texts/s, "
            f"{r['texts_per_cpu_s']:.1f} texts per CPU-s"
        )
    return rows


@contextmanager
def dreamer_timed(coord: MemoryCoordinator, watch: Stopwatch) -> Iterator[None]:
    """The Dreamer's handler on the event bus, timed as its own stage. (Patching
    ``coord.dreamer.on_session_ended`` timed nothing: the bus holds the bound method it subscribed,
    so the Dreamer's time went to "other".)"""
    handlers = coord.services.events._handlers[SESSION_ENDED]
    at = handlers.index(coord.dreamer.on_session_ended)
    handlers[at] = watch.wrap("Dreamer (rules)", handlers[at])
    try:
        yield
    finally:
        handlers[at] = coord.dreamer.on_session_ended


def post_turns(client: Any, s: Session, headers: dict[str, str]) -> float:
    """POST the session's turns one per request, as an agent appends them; the seconds the requests took."""
    took = 0.0
    for turn in s.turns:
        t = time.perf_counter()
        r = client.post(f"/api/memory/sessions/{s.session_id}/turns", json={"turns": [turn]}, headers=headers)
        took += time.perf_counter() - t
        assert r.status_code == 200, r.text
    return took


def chunks(items: list[Session], size: int) -> Iterator[list[Session]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def ratio(pipeline: float, raw: float) -> str:
    return f"{pipeline / raw:.0%}"


def render(results: dict[str, Any]) -> str:
    """Markdown of one run (kept in ingest.json too: ``make bench`` puts it in the README)."""
    st, base = results["stamp"], results["baseline"]
    http = results["paths"][0]
    raw, turns = http["raw"], http["turns"]
    stored = raw["turns_stored"]  # the raw embedder embeds the saved sessions' turns only
    raw_turns, raw_one = stored / raw["turns_s"], stored / base["turns_one_call_s"]
    lines = [
        f"{st['date']}, commit {st['commit']}, {st['machine']}, load average {st['load_start']} → {st['load_end']}",
        "",
        "| path | sessions/s | turns/s | texts embedded/s | saved / sessions | searchable |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in results["paths"]:
        lines.append(
            f"| {p['name']} | {p['sessions_per_s']:.2f} | {p['turns_per_s']:.1f} "
            + ("| — " if p["texts_per_s"] is None else f"| {p['texts_per_s']:.1f} ")
            + f"| {p['saved']} / {p['sessions']} | {p['searchable']} |"
        )
    lines += [
        f"| raw embedder alone on the HTTP path's {base['turn_texts']} turn texts, each session's after its end "
        f"| — | {raw_turns:.1f} | {base['turn_texts'] / raw['turns_s']:.1f} | — | — |",
        f"| raw embedder alone on the same turn texts, one call | — | {raw_one:.1f} "
        f"| {base['turn_texts'] / base['turns_one_call_s']:.1f} | — | — |",
        f"| raw embedder alone on every text the HTTP path embedded (episode + facts + turns + entity names), "
        f"same calls | — | {stored / raw['texts_s']:.1f} | {http['texts_embedded'] / raw['texts_s']:.1f} | — | — |",
        "",
        f"**The HTTP path ingests {http['turns_per_s']:.1f} turns/s: {ratio(http['turns_per_s'], raw_turns)} of the "
        f"raw embedder's {raw_turns:.1f} turns/s on the same turn texts (target ≥ 70 %), "
        f"{ratio(http['turns_per_s'], stored / raw['texts_s'])} of the raw embedder on every text the path "
        f"embeds.** Process CPU per turn: {http['cpu_s'] / turns * 1e3:.0f} ms for the whole path, "
        f"{raw['turns_cpu_s'] / stored * 1e3:.0f} ms for the embedder on the turn texts, "
        f"{raw['texts_cpu_s'] / stored * 1e3:.0f} ms on every text ({stored} of the {turns} turns were in saved "
        "sessions; the raw figures count those).",
        *served_line(results["paths"], raw_turns, raw["turns_cpu_s"] / stored),
        "",
        *(
            f"- {p['name']}: {p['turns_per_s']:.1f} turns/s = {ratio(p['turns_per_s'], raw_turns)} of the raw "
            f"embedder per session ({raw_turns:.1f}), {ratio(p['turns_per_s'], raw_one)} of it in one call "
            f"({raw_one:.1f}); process CPU {p['cpu_s'] / p['turns'] * 1e3:.1f} ms per turn, the raw embedder's "
            f"{raw['turns_cpu_s'] / stored * 1e3:.1f} = {ratio(raw['turns_cpu_s'] / stored, p['cpu_s'] / p['turns'])} "
            "of it (CPU moves less with the host's load than wall time)."
            for p in results["paths"]
        ),
        "",
        f"Length buckets (a call's texts sorted by token length, at most {results['buckets']['batch_texts']} texts "
        f"and {results['buckets']['batch_tokens']} padded tokens per model call) against one batch padded to the "
        f"longest of up to 64 texts (the embedder before), on the HTTP path's first {base['sample_calls']} calls "
        f"({base['sample_texts']} texts):",
        "",
        "| calls | length buckets, texts/s | padded to the longest, texts/s | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for label, key in (("as the path made them", "same_calls_s"), ("cut into calls of 64 texts", "of_64_s")):
        after, before = base["sample_texts"] / base[key], base["sample_texts"] / base[f"padded_{key}"]
        lines.append(f"| {label} | {after:.1f} | {before:.1f} | ×{after / before:.1f} |")
    total = http["wall_s"]
    lines += [
        "",
        f"Where a session's time goes on the HTTP path ({http['sessions']} sessions, {turns} turns, "
        f"{total:.1f} s wall, {http['cpu_s']:.1f} s process CPU): stages in order, exclusive, measured one "
        "after another; stages + other = total.",
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
    for q in (p for p in results["paths"] if p["name"].startswith((QUEUED, SERVED))):
        lines += [
            "",
            f"{q['name']}: its time ({q['sessions']} sessions, {q['wall_s']:.1f} s wall, {q['cpu_s']:.1f} s process "
            "CPU; the worker ingests while the client appends):",
            "",
            "| part | ms per session (wall) | share |",
            "|---|---:|---:|",
            *(
                f"| {name} | {secs / q['sessions'] * 1e3:.1f} | {secs / q['wall_s']:.0%} |"
                for name, secs in q["stages_wall"].items()
            ),
            f"| **total** | **{q['wall_s'] / q['sessions'] * 1e3:.1f}** | 100% |",
        ]
    lines += stage_comparison(results["paths"])
    notes = [p["note"] for p in results["paths"] if p.get("note")]
    return "\n".join([*lines, "", *(f"- {n}" for n in notes), ""])


def served_line(paths: list[dict[str, Any]], raw_turns: float, raw_cpu_per_turn: float) -> list[str]:
    """The path `agtos serve` (and `make run`) ingests by, one turn per POST, said apart: measured on
    `agtos serve` itself where the run has it, else on the in-process queue path (a worker thread)."""
    served = next((p for p in paths if p["name"] == SERVED), None)
    where = (
        "measured on `agtos serve` itself: its own process and worker child, the client over loopback HTTP; CPU "
        "of the server's processes"
    )
    if served is None:
        served = next((p for p in paths if p["name"].startswith(QUEUED)), None)
        where = "measured in process, the worker a thread (not the child `agtos serve` starts)"
    if served is None:
        return []
    return [
        "",
        f"**Under `agtos serve` (queue mode, what `make run` starts), one turn per POST: {served['turns_per_s']:.1f} "
        f"turns/s = {ratio(served['turns_per_s'], raw_turns)} of the raw embedder in wall time, "
        f"{ratio(raw_cpu_per_turn, served['cpu_s'] / served['turns'])} in process CPU per turn** ({where}; the "
        "inline figure above is `create_app()` without a worker, where each session end runs in its request).",
    ]


def stage_comparison(paths: list[dict[str, Any]]) -> list[str]:
    """The batch path's stages beside the HTTP back-fill's (ms per session, wall and CPU), when both ran."""
    batch = next((p for p in paths if p["name"].startswith("batch in process")), None)
    fill = next((p for p in paths if p["name"].startswith(BACKFILL)), None)
    if batch is None or fill is None:
        return []
    names = list(dict.fromkeys([*batch["stages_wall"], *fill["stages_wall"]]))

    def ms(p: dict[str, Any], key: str, name: str) -> str:
        secs = p[key].get(name)
        return "—" if secs is None else f"{secs / p['sessions'] * 1e3:.1f}"

    return [
        "",
        f"The batch path beside the HTTP back-fill, stage by stage ({fill['sessions']} sessions each; exclusive, "
        "stages + other = total):",
        "",
        "| stage | batch, ms per session (wall) | back-fill, wall | batch, CPU ms | back-fill, CPU ms |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {STAGE_LABELS.get(n, n)} | {ms(batch, 'stages_wall', n)} | {ms(fill, 'stages_wall', n)} "
            f"| {ms(batch, 'stages_cpu', n)} | {ms(fill, 'stages_cpu', n)} |"
            for n in names
        ),
        f"| **total** | **{batch['wall_s'] / batch['sessions'] * 1e3:.1f}** "
        f"| **{fill['wall_s'] / fill['sessions'] * 1e3:.1f}** | {batch['cpu_s'] / batch['sessions'] * 1e3:.1f} "
        f"| {fill['cpu_s'] / fill['sessions'] * 1e3:.1f} |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None, help="sessions per path (default: the dataset's)")
    parser.add_argument("--batch", type=int, default=32, help="sessions per batch call / flow run")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR))
    parser.add_argument("--no-flow", action="store_true", help="skip the Prefect flow path")
    parser.add_argument("--sweep", action="store_true", help="only time the embedder's bucket settings")
    parser.add_argument("--padded", action="store_true", help="run the embedder as before length buckets")
    args = parser.parse_args(argv)
    stamp = Stamp()
    run = Run(args)
    embedder = run.coord.semantic.embedder
    if args.padded:  # the "before" figure: one batch padded to the longest of up to 64 texts
        for name, value in PADDED.items():
            setattr(embedder, name, value)
    try:
        run.warm_up(sessions(args.dataset, 1, "warmup")[0])
        if args.sweep:
            rows = sweep(run, sessions(args.dataset, args.sessions, "sweep"))
            out = Path(args.results_dir) / "ingest-sweep.json"
            out.write_text(json.dumps({"rows": rows, "stamp": stamp.done()}, indent=1))
            return 0
        paths = []
        for tag, fn in (
            ("http", run.http),
            ("queue", run.queue),
            ("queue-one-post", lambda todo: run.queue(todo, per_post=0)),
            ("served", run.served),
            ("batch", run.batch),
            ("backfill", run.backfill),
            ("flow", run.flow),
        ):
            if tag == "flow" and args.no_flow:
                continue
            todo = sessions(args.dataset, args.sessions, tag)
            log(f"{tag}: {len(todo)} sessions")
            res = fn(todo)
            if tag == "http":
                log("baseline: the raw embedder on the session path's texts")
                base = run.baseline(run.calls, run.turn_calls)
            run.searchable(todo, res)
            log(f"  {res.sessions / res.wall_s:.1f} sessions/s, {res.turns / res.wall_s:.1f} turns/s; {res.searchable}")
            paths.append(res.public())
    finally:
        run.close()
    buckets = {"batch_texts": getattr(embedder, "batch_size", 0), "batch_tokens": getattr(embedder, "batch_tokens", 0)}
    results = {
        "dataset": Path(args.dataset).name,
        "sessions": paths[0]["sessions"],
        "batch": args.batch,
        "buckets": buckets,
        "paths": paths,
        "baseline": base,
        "stamp": stamp.done(),
    }
    results["markdown"] = render(results)
    out = Path(args.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.json").write_text(json.dumps(results, indent=1))
    text = (
        f"## Ingestion through the real path ({results['sessions']} sessions of {results['dataset']} per path)\n\n"
        + results["markdown"]
    )
    (out / "ingest.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
