"""Long-conversation memory eval through the public HTTP API, beside plain RAG over the raw turns.

Usage (from the repository root; needs a Redis, default ``redis://127.0.0.1:6379/0``)::

    nice -n 10 .venv/bin/python -m benchmarks.eval.api_eval \\
        [--dataset benchmarks/eval/convset.json] [--dataset ../shared/datasets/realtalk-dev/realtalk-dev.json]
        [--limit-conversations N] [--limit-questions N] [--redis-url URL] [--out-dir benchmarks/results]
        [--serve]

Every conversation (haystack) is replayed as one agtos user through the FastAPI app with default
settings: the turns of each session, in date order, are POSTed to
``/api/memory/sessions/{id}/turns`` with their own historical timestamps (the turn's
``timestamp`` when the dataset has one, else the session's date + 30 s per position), the
first speaker as ``role=user`` and the second as ``role=assistant``, each with ``name`` = the
speaker; then ``/end``. Then, per question:

* ``/api/memory/search?q=…&limit=10``: the hits' sessions (a hit's ``sessionId`` when it has
  one, else its episode id mapped to the session whose ``/end`` returned it) give the
  evidence-session recall@1/5/10; the hits' text (every string field but ids) is searched for
  the answer;
* ``/api/memory/context`` with ``token_budget`` 1,000 and 2,000: the answer in its ``context``;
* everything the user has stored, read back through the Parquet export (``agtos memory export``):
  the answer anywhere in it.

In the same run, on the same questions, two baselines over the raw turns
(:mod:`benchmarks.eval.baselines`): BM25 (``bm25s``) and dense cosine with the service's own
embedder, each turn a line ``(8 May 2023) Gina: …``; their contexts are their top lines in rank
order, and "stored" is the whole raw log. "Answer present" is one rule for every text
(:mod:`benchmarks.eval.answers`).

``--serve``: the same requests go over loopback HTTP to a real ``agtos serve`` started for the run
(:func:`benchmarks.load.start_server`, layout ``child``: the ``agtos serve`` defaults, i.e. queue mode
with its ``agtos worker`` child at idle priority, as ``make run`` starts it), stopped at the end; no
``?wait`` on the ends, as a harness would send them. The export and the dense baseline's embedder
come from a coordinator on the same Redis and key prefix. The ends' ``status`` (``done``, ``queued``)
are counted in the results' ``ingestion.end_status``.

Recall counts a question when any of its evidence sessions is in the top k; questions without
evidence count for the answer metrics only. Results: one markdown table per dataset (rows: the
question kinds and overall; cells: agtos · BM25 · dense), printed and written with the
per-question details to ``benchmarks/results/api-eval-<dataset>.{md,json}``.
"""

from __future__ import annotations

# harness first: it sets PREFECT_HOME before agtos.flows is imported, and loads the embedder
# before anything imports usearch.
from benchmarks.eval.harness import (  # isort: skip
    DEFAULT_REDIS_URL,
    RESULTS_DIR,
    TURN_SPACING_MS,
    agtos_session_id,
    agtos_user_id,
    delete_prefix,
    make_settings,
)

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]
import pyarrow.parquet as pq
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.providers.embeddings import Embedder
from agtos.serving.app import create_app
from agtos.storage.redis_conn import StorageUnavailable
from benchmarks.eval.answers import answer_present, text_tokens
from benchmarks.eval.baselines import RawTurn, RawTurnRetriever, fill_budget, sessions_in_order
from benchmarks.eval.dataset import Dataset, DatasetError, Haystack, Question, date_ms, load_dataset
from benchmarks.load import queue_state, start_server
from benchmarks.stamp import Stamp

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATASETS = (
    REPO / "benchmarks" / "eval" / "convset.json",
    REPO.parent / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json",
)
KS = (1, 5, 10)
BUDGETS = (1_000, 2_000)
TOP_N = 10  # hits / turns whose text is searched for the answer
SYSTEMS = ("agtos", "bm25", "dense")
USER_HEADER = "X-User-Id"
POST_BATCH = 200  # the turns route takes at most 200 turns per call
ID_KEYS = frozenset({"id", "sessionId", "session_id", "user_id", "userId", "episode_id", "episodeId", "matchType"})

#: LoCoMo categories (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and
#: LongMemEval question types, as the four kinds of the held-out set (plus updates, adversarial).
KIND_OF = {
    "locomo-category-1": "multi-hop",
    "locomo-category-2": "temporal",
    "locomo-category-3": "open-domain",
    "locomo-category-4": "single-hop",
    "locomo-category-5": "adversarial",
    "single-session-user": "single-hop",
    "single-session-assistant": "single-hop",
    "single-session-preference": "single-hop",
    "single-session-paraphrase": "single-hop",
    "multi-session": "multi-hop",
    "temporal-reasoning": "temporal",
    "knowledge-update": "update",
}
KIND_ORDER = ("single-hop", "multi-hop", "temporal", "open-domain", "update", "adversarial")


Client = TestClient | httpx.Client  # in process, or over loopback HTTP (``--serve``)


def kind_of(question_type: str) -> str:
    return KIND_OF.get(question_type, question_type)


# -- replay through the API ---------------------------------------------------------------
def turn_timestamps(haystack: Haystack) -> list[list[int]]:
    """Per session, per turn: the turn's own timestamp, else the session date + 30 s per position."""
    out = []
    for date, turns in zip(haystack.session_timestamps_ms(), haystack.haystack_sessions, strict=True):
        out.append([date_ms(t.timestamp) if t.timestamp else date + n * TURN_SPACING_MS for n, t in enumerate(turns)])
    return out


@dataclass
class Replay:
    """One conversation after its replay: where its sessions went and what the raw log was."""

    haystack_id: str
    user_id: str
    session_of: dict[str, str] = field(default_factory=dict)  # agtos episode/session id -> dataset session id
    saved: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # save-heuristics reason -> sessions
    end_status: dict[str, int] = field(default_factory=dict)  # the ends' ``status`` (done, queued) -> sessions
    end_ms: list[float] = field(default_factory=list)  # each end's answer time
    raw_turns: list[RawTurn] = field(default_factory=list)
    stored: dict[str, str] = field(default_factory=dict)  # exported record kind -> its text
    seconds: float = 0.0

    def session(self, hit: dict[str, Any]) -> str:
        """The dataset session of a search hit: by its ``sessionId`` if it has one, else its episode id."""
        for key in ("sessionId", "id"):
            value = hit.get(key)
            if isinstance(value, str) and value in self.session_of:
                return self.session_of[value]
        return f"?{hit.get('id', '')}"


def _check(response: Any, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body


def replay_conversation(client: Client, haystack: Haystack, post: bool = True) -> Replay:
    """POST every session's turns (date order) and end it; record the raw log beside. ``post=False``:
    only the raw log and the session ids (the conversation is stored already, see ``--key-prefix``)."""
    started = time.perf_counter()
    out = Replay(haystack.haystack_id, agtos_user_id(haystack.haystack_id))
    headers = {USER_HEADER: out.user_id}
    stamps = turn_timestamps(haystack)
    order = sorted(range(len(stamps)), key=lambda i: (stamps[i][0] if stamps[i] else 0, i))
    for i in order:
        sid = haystack.haystack_session_ids[i]
        asid = agtos_session_id(sid)
        out.session_of[asid] = sid
        turns = [(t, ts) for t, ts in zip(haystack.haystack_sessions[i], stamps[i], strict=True) if t.content.strip()]
        payload = []
        for n, (turn, ts) in enumerate(turns, start=1):
            speaker = turn.name or turn.role.capitalize()
            out.raw_turns.append(RawTurn(sid, turn.dia_id or f"{sid}:{n}", speaker, ts, turn.content))
            item: dict[str, Any] = {"role": turn.role, "content": turn.content[:100_000], "timestamp": ts}
            if turn.name:
                item["name"] = turn.name[:128]
            payload.append(item)
        if not post:
            continue
        for start in range(0, len(payload), POST_BATCH):
            body = {"turns": payload[start : start + POST_BATCH]}
            _check(client.post(f"/api/memory/sessions/{asid}/turns", json=body, headers=headers), f"turns of {sid}")
        if not payload:
            out.skipped["session has no turns"] = out.skipped.get("session has no turns", 0) + 1
            continue
        end_started = time.perf_counter()
        ended = _check(client.post(f"/api/memory/sessions/{asid}/end", headers=headers), f"end of {sid}")
        out.end_ms.append((time.perf_counter() - end_started) * 1000)
        status = str(ended.get("status") or "none")
        out.end_status[status] = out.end_status.get(status, 0) + 1
        episode_id = (ended.get("episode") or {}).get("id") or ended.get("episodeId")
        if ended.get("saved") and episode_id:  # a queued end names its episode before it is stored
            out.session_of[episode_id] = sid
            out.saved += 1
        else:
            reason = str(ended.get("reason") or "not saved")
            out.skipped[reason] = out.skipped.get(reason, 0) + 1
    out.seconds = round(time.perf_counter() - started, 1)
    return out


def strings(value: Any, skip: frozenset[str] = ID_KEYS) -> Iterable[str]:
    """Every string inside a JSON-like value, but the values of id keys."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in skip:
                yield from strings(item, skip)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item, skip)


def stored_texts(coordinator: MemoryCoordinator, user_id: str, work_dir: Path) -> dict[str, str]:
    """All the text stored for the user, per record kind, read back from a Parquet export of that user."""
    out_dir = work_dir / f"export-{uuid.uuid4().hex[:8]}"
    # the export takes the coordinator's services (older trees: the coordinator itself), so
    # the same script measures the code before and after the services split
    export_snapshot(getattr(coordinator, "services", coordinator), out_dir, [user_id])
    try:
        return {
            path.stem: "\n".join(strings(pq.read_table(path).to_pylist())) for path in sorted(out_dir.glob("*.parquet"))
        }
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


# -- scoring --------------------------------------------------------------------------------
def recall_at(ranked: Sequence[str], gold: Sequence[str], ks: Sequence[int] = KS) -> dict[int, bool] | None:
    """Whether any gold session is among the first k ranked ones; None when there is no gold."""
    if not gold:
        return None
    first = next((i for i, s in enumerate(ranked, start=1) if s in set(gold)), None)
    return {k: first is not None and first <= k for k in ks}


def score_system(
    answer: str, ranked: Sequence[str], gold: Sequence[str], top_text: str, contexts: dict[int, str], stored: Any
) -> dict[str, Any]:
    """One system's outcome on one question (``stored``: the stored text, or its token set)."""
    return {
        "ranked": list(ranked[: max(KS)]),
        "recall": recall_at(ranked, gold),
        "top": answer_present(answer, top_text),
        **{f"ctx{b}": answer_present(answer, contexts[b]) for b in BUDGETS},
        "stored": answer_present(answer, stored),
    }


def evaluate_question(
    client: Client, replay: Replay, question: Question, retriever: RawTurnRetriever, stored: dict[str, Any]
) -> dict[str, Any]:
    """agtos (search, two contexts, what is stored) and both baselines on one question."""
    headers = {USER_HEADER: replay.user_id}
    started = time.perf_counter()
    found = _check(
        client.get("/api/memory/search", params={"q": question.question[:1_000], "limit": TOP_N}, headers=headers),
        f"search {question.question_id}",
    )
    search_ms = (time.perf_counter() - started) * 1000
    hits = found["results"]
    contexts = {
        b: _check(
            client.post(
                "/api/memory/context", json={"query": question.question[:1_000], "token_budget": b}, headers=headers
            ),
            f"context {question.question_id}",
        )
        for b in BUDGETS
    }
    gold, answer = question.answer_session_ids, question.answer
    systems = {
        "agtos": score_system(
            answer,
            sessions_in_order([replay.session(h) for h in hits]),
            gold,
            "\n".join(strings(hits[:TOP_N])),
            {b: c["context"] for b, c in contexts.items()},
            stored["agtos"],
        )
    }
    systems["agtos"]["context_tokens"] = {str(b): c.get("tokens") for b, c in contexts.items()}
    systems["agtos"]["stored_in"] = [k for k, tokens in stored["by_kind"].items() if answer_present(answer, tokens)]
    baselines = (("bm25", retriever.bm25), ("dense", retriever.dense))
    for name, rank in baselines[: 2 if retriever.has_dense else 1]:
        order = rank(question.question)
        lines = [retriever.lines[i] for i in order]
        systems[name] = score_system(
            answer,
            sessions_in_order([retriever.turns[i].session_id for i in order]),
            gold,
            "\n".join(lines[:TOP_N]),
            {b: fill_budget(lines, b) for b in BUDGETS},
            stored["raw"],
        )
    return {
        "question_id": question.question_id,
        "haystack_id": question.haystack_id,
        "kind": kind_of(question.question_type),
        "question": question.question,
        "answer": answer,
        "evidence": question.evidence,
        "gold_sessions": gold,
        "search_ms": round(search_ms, 2),
        "systems": systems,
    }


# -- aggregation and report ---------------------------------------------------------------------
METRICS = (*(f"recall@{k}" for k in KS), "top", *(f"ctx{b}" for b in BUDGETS), "stored")


def _quantiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p90 and max, rounded to the millisecond."""
    if not values:
        return None
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered)),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))]),
        "max": round(ordered[-1]),
    }


def _mean(values: Sequence[bool | float]) -> float | None:
    return round(sum(float(v) for v in values) / len(values), 4) if values else None


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per system: mean of every metric (recall over the questions with evidence sessions)."""
    out: dict[str, Any] = {"n": len(rows), "n_with_evidence": sum(bool(r["gold_sessions"]) for r in rows)}
    for system in SYSTEMS:
        scored = [r["systems"][system] for r in rows if system in r["systems"]]
        if not scored:
            continue
        with_gold = [s for s in scored if s["recall"] is not None]
        out[system] = {
            **{f"recall@{k}": _mean([s["recall"][k] for s in with_gold]) for k in KS},
            "top": _mean([s["top"] for s in scored]),
            **{f"ctx{b}": _mean([s[f"ctx{b}"] for s in scored]) for b in BUDGETS},
            "stored": _mean([s["stored"] for s in scored]),
        }
    return out


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    kinds = [k for k in KIND_ORDER if any(r["kind"] == k for r in rows)]
    kinds += sorted({r["kind"] for r in rows} - set(kinds))
    record_kinds = sorted({k for r in rows for k in r["systems"]["agtos"]["stored_in"]})
    return {
        "by_kind": {k: aggregate([r for r in rows if r["kind"] == k]) for k in kinds},
        "overall": aggregate(rows),
        "agtos_stored_by_record_kind": {
            k: _mean([k in r["systems"]["agtos"]["stored_in"] for r in rows]) for k in record_kinds
        },
    }


def _cell(agg: dict[str, Any], metric: str, systems: Sequence[str]) -> str:
    values = [agg.get(s, {}).get(metric) for s in systems]
    return " · ".join("–" if v is None else f"{v:.2f}" for v in values)


def render_markdown(results: dict[str, Any]) -> str:
    """The dataset's table: rows are kinds and overall, cells agtos · BM25 · dense."""
    ds, summary, st = results["dataset"], results["summary"], results["settings"]
    systems = [s for s in SYSTEMS if s in summary["overall"]]
    header = ["kind", "n", *(f"session@{k}" for k in KS), f"answer in top {TOP_N}"]
    header += [f"answer in {b:,}-token context" for b in BUDGETS] + ["answer stored"]
    lines = [
        f"### {ds['name']}: {ds['conversations']} conversations, {ds['sessions']} sessions, {ds['turns']} turns, "
        f"{ds['questions']} questions",
        "",
        f"Cells: {' · '.join(systems)} (agtos through the HTTP API with default settings; BM25 and dense "
        f"cosine over the raw dated turns). _answer stored_: agtos's export vs the raw log.",
        "",
        "| " + " | ".join(header) + " |",
        "|---|---:|" + "---:|" * (len(header) - 2),
    ]
    rows = [*summary["by_kind"].items(), ("**overall**", summary["overall"])]
    for name, agg in rows:
        cells = [name, str(agg["n"]), *(_cell(agg, m, systems) for m in METRICS[:-1])]
        cells.append(_cell(agg, "stored", systems[:2]))
        lines.append("| " + " | ".join(cells) + " |")
    ing = results["ingestion"]
    lines += [
        "",
        (
            f"Ingestion: {ing['saved']}/{ds['sessions']} sessions saved as episodes "
            f"({', '.join(f'{r}: {n}' for r, n in ing['skipped'].items()) or 'none skipped'}), {ing['seconds']} s; "
            if ing.get("replayed", True)
            else "Ingestion: none, the conversations stored by an earlier run were scored again (--key-prefix); "
        )
        + f"search p50 {st['search_ms_p50']} ms; mean tokens of the agtos contexts: "
        + ", ".join(f"{b}: {v:.0f}" for b, v in st["context_tokens_mean"].items() if v is not None)
        + f"; embedder {st['embedder'] or 'UNAVAILABLE (no dense baseline)'}.",
        "agtos answer stored, within one exported record kind: "
        + (", ".join(f"{k} {v:.2f}" for k, v in summary["agtos_stored_by_record_kind"].items()) or "none")
        + ".",
    ]
    if st.get("served"):
        ends = ", ".join(f"{status} {n}" for status, n in ing["end_status"].items()) or "none"
        lines.append(
            f"Served by a real `agtos serve` ({st['served']['layout']}: queue mode, worker child), no `?wait`: "
            f"the ends answered {ends}; end answer time {ing['end_ms']} ms."
        )
    return "\n".join(lines) + "\n"


# -- the run --------------------------------------------------------------------------------------
def limit_dataset(dataset: Dataset, conversations: int | None, questions: int | None) -> Dataset:
    """The first ``conversations`` haystacks and, of each, its first ``questions`` questions."""
    haystacks = dataset.haystacks[:conversations] if conversations else dataset.haystacks
    keep = {h.haystack_id for h in haystacks}
    taken: dict[str, int] = {}
    chosen = []
    for q in dataset.questions:
        if q.haystack_id in keep and (questions is None or taken.get(q.haystack_id, 0) < questions):
            taken[q.haystack_id] = taken.get(q.haystack_id, 0) + 1
            chosen.append(q)
    return dataset.model_copy(update={"haystacks": haystacks, "questions": chosen})


def evaluate(
    dataset: Dataset,
    client: Client,
    coordinator: MemoryCoordinator,
    work_dir: Path,
    progress: Callable[[str], None] = lambda _m: None,
    post_turns: bool = True,
    queue: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Replay every conversation (``post_turns=False``: they are stored already), then score every
    question for agtos and both baselines. ``queue``: the ingestion queue's state, read after each
    replay (``--serve``), kept in the results."""
    embedder: Embedder | None = coordinator.semantic.embedder if coordinator.semantic.embedder_available() else None
    rows: list[dict[str, Any]] = []
    replays: list[Replay] = []
    queue_after: dict[str, Any] = {}
    for n, hay in enumerate(dataset.haystacks, start=1):
        replay = replay_conversation(client, hay, post=post_turns)
        replays.append(replay)
        if queue is not None:
            queue_after[hay.haystack_id] = queue()
        replay.stored = stored_texts(coordinator, replay.user_id, work_dir)
        progress(
            f"replayed {n}/{len(dataset.haystacks)} {hay.haystack_id}: {replay.saved} saved, {replay.seconds} s, "
            f"ends {replay.end_status}" + (f", queue {queue_after[hay.haystack_id]}" if queue is not None else "")
        )
        retriever = RawTurnRetriever(replay.raw_turns, embedder)
        stored = {
            "agtos": text_tokens("\n".join(replay.stored.values())),
            "raw": text_tokens("\n".join(retriever.lines)),
            "by_kind": {kind: text_tokens(text) for kind, text in replay.stored.items() if text},
        }
        questions = [q for q in dataset.questions if q.haystack_id == hay.haystack_id]
        rows += [evaluate_question(client, replay, q, retriever, stored) for q in questions]
        progress(f"scored {len(questions)} questions of {hay.haystack_id}")
    searches = sorted(r["search_ms"] for r in rows)
    tokens = {
        str(b): _mean([r["systems"]["agtos"]["context_tokens"][str(b)] or 0 for r in rows]) if rows else None
        for b in BUDGETS
    }
    return {
        "dataset": {
            "name": dataset.name,
            "conversations": len(dataset.haystacks),
            "sessions": sum(len(h.haystack_session_ids) for h in dataset.haystacks),
            "turns": sum(len(r.raw_turns) for r in replays),
            "questions": len(dataset.questions),
        },
        "settings": {
            "top_n": TOP_N,
            "ks": list(KS),
            "budgets": list(BUDGETS),
            "embedder": embedder.name if embedder is not None else None,
            "search_mode": coordinator.settings.search_mode,
            "search_ms_p50": round(statistics.median(searches), 1) if searches else None,
            "context_tokens_mean": tokens,
        },
        "ingestion": {
            "replayed": post_turns,
            "saved": sum(r.saved for r in replays),
            "skipped": {
                reason: sum(r.skipped.get(reason, 0) for r in replays)
                for reason in sorted({k for r in replays for k in r.skipped})
            },
            "seconds": round(sum(r.seconds for r in replays), 1),
            "end_status": {
                status: sum(r.end_status.get(status, 0) for r in replays)
                for status in sorted({k for r in replays for k in r.end_status})
            },
            "end_ms": _quantiles([ms for r in replays for ms in r.end_ms]),
            "queue_after_replay": queue_after,
            "stored_chars": {r.haystack_id: {k: len(t) for k, t in r.stored.items()} for r in replays},
        },
        "summary": summarise(rows),
        "questions": rows,
    }


def run(
    dataset: Dataset,
    redis_url: str = DEFAULT_REDIS_URL,
    progress: Callable[[str], None] = lambda _m: None,
    key_prefix: str | None = None,
    keep: bool = False,
    serve: bool = False,
) -> dict[str, Any]:
    """``evaluate`` against a fresh app under a throw-away key prefix, deleted afterwards whatever happens.
    ``keep``: the keys stay, and a later run with the same ``key_prefix`` (and dataset) scores the stored
    conversations again without replaying them (to iterate on search and context). ``serve``: against a
    real ``agtos serve`` (queue mode, worker child) started for the run and stopped after it."""
    prefix = key_prefix or f"agtos-eval-{uuid.uuid4().hex[:10]}"
    stored_already = keep and _has_keys(redis_url, prefix)
    work_dir = Path(tempfile.mkdtemp(prefix="agtos-api-eval-"))
    coordinator: MemoryCoordinator | None = None
    try:
        coordinator = MemoryCoordinator(make_settings(redis_url, prefix, work_dir))
        if serve:
            return _evaluate_served(dataset, coordinator, work_dir, progress, post_turns=not stored_already)
        with TestClient(create_app(coordinator=coordinator)) as client:
            return evaluate(dataset, client, coordinator, work_dir, progress, post_turns=not stored_already)
    finally:
        if coordinator is not None:
            coordinator.close()
        if keep:
            progress(f"kept the Redis keys under {prefix}: (delete them with redis-cli --scan --pattern '{prefix}:*')")
        else:
            removed = delete_prefix(redis_url, prefix)
            progress(f"deleted {removed} Redis keys under {prefix}:")
        shutil.rmtree(work_dir, ignore_errors=True)


def _evaluate_served(
    dataset: Dataset,
    coordinator: MemoryCoordinator,
    work_dir: Path,
    progress: Callable[[str], None],
    post_turns: bool,
) -> dict[str, Any]:
    """``evaluate`` over loopback HTTP against an ``agtos serve`` on the coordinator's Redis and prefix."""
    settings = coordinator.settings
    server = start_server(settings.redis_url or DEFAULT_REDIS_URL, settings.key_prefix, work_dir / "serve", "child")
    try:
        progress(f"agtos serve at {server.url} (pids {server.pids}), log {work_dir / 'serve' / 'server.log'}")
        with httpx.Client(base_url=server.url, timeout=120) as client:
            results = evaluate(
                dataset, client, coordinator, work_dir, progress, post_turns, lambda: queue_state(server.url)
            )
        results["settings"]["served"] = {
            "layout": "child",
            "pids": [*server.pids, *(p.pid for p in psutil.Process(server.api.pid).children(recursive=True))],
            "key_prefix": settings.key_prefix,
            "health": queue_state(server.url),
        }
        return results
    finally:
        server.stop()


def _has_keys(redis_url: str, prefix: str) -> bool:
    client = redis.Redis.from_url(redis_url)
    try:
        return next(iter(client.scan_iter(match=f"{prefix}:*", count=1000)), None) is not None
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval.api_eval", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        action="append",
        help="LoCoMo-layout (or native) JSON; repeatable; default: the synthetic set and realtalk-dev if present",
    )
    parser.add_argument("--limit-conversations", type=int, metavar="N", help="only the first N conversations")
    parser.add_argument("--limit-questions", type=int, metavar="N", help="only the first N questions of each")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--key-prefix",
        help="keep the replayed conversations under this Redis key prefix; when it holds keys already, score "
        "them again without replaying (one dataset per prefix; fast iteration on search and context)",
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="replay against a real `agtos serve` (queue mode, worker child: its defaults) started for the run",
    )
    args = parser.parse_args(argv)
    for flag in ("limit_conversations", "limit_questions"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    progress = (lambda _m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    status = 0
    for path in args.dataset or list(DEFAULT_DATASETS):
        if not path.exists():
            print(f"skipped: {path} not found", file=sys.stderr)
            continue
        try:
            dataset = limit_dataset(load_dataset(path), args.limit_conversations, args.limit_questions)
        except DatasetError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        stamp = Stamp()
        try:
            prefix = f"{args.key_prefix}-{path.stem}" if args.key_prefix else None
            results = run(
                dataset, args.redis_url, progress, key_prefix=prefix, keep=prefix is not None, serve=args.serve
            )
        except (redis.exceptions.ConnectionError, StorageUnavailable) as exc:
            print(f"error: cannot reach Redis at {args.redis_url}: {exc}", file=sys.stderr)
            return 3
        results["dataset"]["path"] = str(path)
        results["limits"] = {"conversations": args.limit_conversations, "questions": args.limit_questions}
        results["stamp"] = stamp.done()
        report = render_markdown(results)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        base = args.out_dir / f"api-eval-{path.stem}"
        base.with_suffix(".json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        base.with_suffix(".md").write_text(report, encoding="utf-8")
        print(report)
        print(f"results: {base}.md, {base}.json")
    return status


if __name__ == "__main__":
    sys.exit(main())
