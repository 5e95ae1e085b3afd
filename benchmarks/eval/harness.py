"""Long-memory retrieval evaluation (LongMemEval / LoCoMo shape): recall@k, MRR, update accuracy.

Usage (from the repository root; needs a Redis, default ``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m benchmarks.eval.harness [--dataset benchmarks/eval/devset.json]
        [--k 1,5,10] [--modes hybrid,vector,bm25] [--redis-url URL] [--out PATH] [--from-env]

For every haystack (one user's history) it replays the sessions in date order through the
real path: ``MemoryCoordinator.add_turn`` for each turn (timestamps from the dataset's
session date), then ``end_session`` (summarise → save heuristics → ingestion → Dreamer).
Sessions the save heuristics skip are counted and reported. Dataset session ids map to
the episode ids ``end_session`` returns.

Then, for every question and mode, ``search_episodes(user, question, limit=max(k), mode)``
is scored against the gold sessions (``answer_session_ids``):

* ``recall_any@k``: at least one gold session in the top k; ``recall_all@k``: all of them;
* ``MRR``: 1 / rank of the first gold session (0 when none is in the top max(k));
* ``update accuracy`` (questions with ``superseded_session_ids``): a gold (later) session is
  retrieved and ranks above every superseded (earlier) one;
* everything again per ``question_type``.

``question_date`` is kept in the results but not used: ``search_episodes`` takes no time input,
so temporal questions are scored on finding the sessions that hold the dated events.

Also reported, independent of the mode: how much of the evidence turns' content survives in
the stored episode text (``evidence retained``) and how many of the question's content words
occur in the gold sessions (``question overlap``, low for paraphrases).

Prints a markdown table per mode and writes the details to
``benchmarks/results/eval-<dataset>.json``. Everything runs under a throw-away Redis key
prefix that is deleted at the end, also on error or Ctrl-C. ``--from-env`` builds the
settings from the environment (LLM slots, embedder) instead of the offline defaults.
"""

# Environment first: Prefect reads PREFECT_HOME when agtos.flows is imported.

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="agtos-eval-prefect-")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], True)  # no temp dir left behind
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script or with -m

# tokenizers (imported by agtos.providers.embeddings) must be loaded before usearch:
# importing usearch and then onnxruntime without it segfaults in this environment.
import agtos.providers.embeddings  # noqa: F401, I001

import argparse
import hashlib
import json
import signal
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from agtos.config import SEARCH_MODES, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Turn
from agtos.storage.keys import record_id_pattern, user_id_pattern
from agtos.storage.redis_conn import StorageUnavailable
from agtos.tasks.text import content_words, episode_text
from benchmarks.eval.dataset import Dataset, DatasetError, Haystack, Question, load_dataset
from benchmarks.stamp import Stamp

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATASET = REPO / "benchmarks" / "eval" / "devset.json"
RESULTS_DIR = REPO / "benchmarks" / "results"
DEFAULT_REDIS_URL = os.environ.get("AGTOS_TEST_REDIS_URL") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
TURN_SPACING_MS = 30_000  # turns of a session are 30 s apart, starting at the session date
TYPE_ORDER = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "single-session-paraphrase",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)


# -- ids --------------------------------------------------------------------------------
def _safe_id(value: str, pattern: Any, prefix: str, max_len: int = 128) -> str:
    candidate = f"{prefix}{value}"
    if len(candidate) <= max_len and pattern.fullmatch(candidate):
        return candidate
    return f"{prefix}{hashlib.sha256(value.encode()).hexdigest()[:20]}"


def agtos_user_id(haystack_id: str) -> str:
    """The agtos user one haystack is replayed as (the haystack id when it is a valid user id)."""
    return _safe_id(haystack_id, user_id_pattern(), "eval.")


def agtos_session_id(session_id: str) -> str:
    """The dataset's session id when agtos accepts it, else a stable hash of it."""
    return session_id if record_id_pattern().fullmatch(session_id) else _safe_id(session_id, record_id_pattern(), "s-")


# -- ingestion --------------------------------------------------------------------------
@dataclass
class SessionIngest:
    session_id: str
    agtos_session_id: str
    episode_id: str  # "" until the session is saved
    timestamp_ms: int
    turns: int
    saved: bool
    reason: str
    timestamp_ok: bool | None = None
    episode_text: str | None = None  # what was stored, embedded and BM25-indexed


@dataclass
class HaystackIngest:
    haystack_id: str
    user_id: str
    sessions: dict[str, SessionIngest] = field(default_factory=dict)
    episode_text: dict[str, str] = field(default_factory=dict)  # dataset session id -> stored episode text

    def session_of_episode(self) -> dict[str, str]:
        return {s.episode_id: s.session_id for s in self.sessions.values() if s.episode_id}


def ingest_haystack(coordinator: MemoryCoordinator, haystack: Haystack) -> HaystackIngest:
    """Replay the sessions in date order: add_turn for each turn, then end_session."""
    user_id = agtos_user_id(haystack.haystack_id)
    out = HaystackIngest(haystack.haystack_id, user_id)
    stamps = haystack.session_timestamps_ms()
    order = sorted(range(len(stamps)), key=lambda i: (stamps[i], i))
    for i in order:
        sid = haystack.haystack_session_ids[i]
        asid = agtos_session_id(sid)
        turns = [t for t in haystack.haystack_sessions[i] if t.content.strip()]
        record = SessionIngest(sid, asid, "", stamps[i], len(turns), False, "")
        out.sessions[sid] = record
        if not turns:
            record.reason = "session has no turns"
            continue
        for n, turn in enumerate(turns):
            content = f"{turn.name}: {turn.content}" if turn.name else turn.content  # LoCoMo: speaker in the text
            coordinator.add_turn(
                user_id,
                asid,
                Turn(role=turn.role, content=content[:100_000], timestamp=stamps[i] + n * TURN_SPACING_MS),
            )
        result = coordinator.end_session(user_id, asid)
        record.saved, record.reason = result.saved, result.reason
        if result.episode is not None:
            record.episode_id = result.episode.id
            record.timestamp_ok = result.episode.timestamp == stamps[i] + (len(turns) - 1) * TURN_SPACING_MS
            stored = coordinator.episodes.get(user_id, record.episode_id)
            record.episode_text = out.episode_text[sid] = episode_text(stored or result.episode)
    return out


# -- scoring (pure) ---------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """How one question fared in one mode. Ranks are 1-based within the retrieved list."""

    first_gold_rank: int | None
    gold_ranks: dict[str, int | None]
    recall_any: dict[int, bool]
    recall_all: dict[int, bool]
    reciprocal_rank: float
    superseded_rank: int | None = None
    update_correct: bool | None = None  # None: not a knowledge-update question


def score_ranking(
    ranked: Sequence[str], gold: Sequence[str], ks: Sequence[int], superseded: Sequence[str] = ()
) -> Outcome:
    """Score a ranked list of session ids against the gold (and superseded) session ids."""
    rank_of: dict[str, int] = {}
    for i, sid in enumerate(ranked, start=1):
        rank_of.setdefault(sid, i)
    gold_ranks = {g: rank_of.get(g) for g in gold}
    found = [r for r in gold_ranks.values() if r is not None]
    first = min(found) if found else None
    recall_any = {k: first is not None and first <= k for k in ks}
    recall_all = {k: bool(gold) and all(r is not None and r <= k for r in gold_ranks.values()) for k in ks}
    sup_found = [rank_of[s] for s in superseded if s in rank_of]
    sup_rank = min(sup_found) if sup_found else None
    update = None
    if superseded:
        update = first is not None and (sup_rank is None or first < sup_rank)
    return Outcome(first, gold_ranks, recall_any, recall_all, 1.0 / first if first else 0.0, sup_rank, update)


def aggregate(outcomes: Sequence[Outcome], ks: Sequence[int]) -> dict[str, Any]:
    """Means over the questions: recall_any@k, recall_all@k, MRR, and update accuracy."""
    n = len(outcomes)
    out: dict[str, Any] = {"n": n}
    for k in ks:
        out[f"recall_any@{k}"] = _mean(o.recall_any[k] for o in outcomes)
        out[f"recall_all@{k}"] = _mean(o.recall_all[k] for o in outcomes)
    out["mrr"] = _mean(o.reciprocal_rank for o in outcomes)
    updates = [o for o in outcomes if o.update_correct is not None]
    out["update"] = {
        "n": len(updates),
        "correct": sum(bool(o.update_correct) for o in updates),
        "accuracy": _mean(bool(o.update_correct) for o in updates),
        "superseded_above_gold": sum(
            o.superseded_rank is not None and (o.first_gold_rank is None or o.superseded_rank < o.first_gold_rank)
            for o in updates
        ),
        "gold_not_retrieved": sum(o.first_gold_rank is None for o in updates),
    }
    return out


def _mean(values: Any) -> float | None:
    items = [float(v) for v in values]
    return round(sum(items) / len(items), 4) if items else None


def _type_order(types: Sequence[str]) -> list[str]:
    known = [t for t in TYPE_ORDER if t in types]
    return known + sorted(t for t in types if t not in TYPE_ORDER)


# -- diagnostics (mode-independent) -----------------------------------------------------
def _coverage(words: set[str], text: str | None) -> float | None:
    if not words:
        return None
    if text is None:
        return 0.0
    return round(len(words & set(content_words(text))) / len(words), 4)


def question_diagnostics(question: Question, haystack: Haystack, ingest: HaystackIngest) -> dict[str, Any]:
    """Evidence retained in the stored episodes, and the question's word overlap with the gold sessions."""
    sessions = dict(zip(haystack.haystack_session_ids, haystack.haystack_sessions, strict=True))
    retained = []
    gold_words: set[str] = set()
    for sid in question.answer_session_ids:
        turns = sessions[sid]
        gold_words |= {w for t in turns for w in content_words(t.content)}
        evidence = {w for t in turns if t.has_answer for w in content_words(t.content)}
        cov = _coverage(evidence, ingest.episode_text.get(sid))
        if cov is not None:
            retained.append(cov)
    q_words = set(content_words(question.question))
    return {
        "gold_saved": [ingest.sessions[s].saved for s in question.answer_session_ids],
        "evidence_retained": round(statistics.fmean(retained), 4) if retained else None,
        "question_overlap": round(len(q_words & gold_words) / len(q_words), 4) if q_words else None,
    }


# -- the run ----------------------------------------------------------------------------
def evaluate(
    dataset: Dataset,
    coordinator: MemoryCoordinator,
    ks: Sequence[int] = (1, 5, 10),
    modes: Sequence[str] = SEARCH_MODES,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest every haystack, run every question in every mode, and return the results."""
    ks = sorted(set(ks))
    say = progress or (lambda _msg: None)
    embedder_ok = coordinator.semantic.embedder_available()
    if not embedder_ok and any(m != "bm25" for m in modes):
        say("WARNING: embedder unavailable, vector and hybrid searches fall back to BM25")
    t0 = time.perf_counter()
    ingests: dict[str, HaystackIngest] = {}
    for i, hay in enumerate(dataset.haystacks, start=1):
        ingests[hay.haystack_id] = ingest_haystack(coordinator, hay)
        saved = sum(s.saved for s in ingests[hay.haystack_id].sessions.values())
        say(f"ingested {i}/{len(dataset.haystacks)} {hay.haystack_id}: {saved}/{len(hay.haystack_session_ids)} saved")
    ingest_s = time.perf_counter() - t0

    all_sessions = [s for ing in ingests.values() for s in ing.sessions.values()]
    skipped = [s for s in all_sessions if not s.saved]
    gold_skipped = sorted(
        {(q.haystack_id, sid) for q in dataset.questions for sid in q.answer_session_ids}
        & {(hid, s.session_id) for hid, ing in ingests.items() for s in ing.sessions.values() if not s.saved}
    )
    max_k = max(ks)
    questions: list[dict[str, Any]] = []
    outcomes: dict[str, list[tuple[Question, Outcome]]] = {m: [] for m in modes}
    latencies: dict[str, list[float]] = {m: [] for m in modes}
    for q in dataset.questions:
        hay, ing = dataset.haystack(q.haystack_id), ingests[q.haystack_id]
        to_session = ing.session_of_episode()
        detail: dict[str, Any] = {
            "question_id": q.question_id,
            "haystack_id": q.haystack_id,
            "question_type": q.question_type,
            "question": q.question,
            "answer": q.answer,
            "gold": q.answer_session_ids,
            "superseded": q.superseded_session_ids,
            **question_diagnostics(q, hay, ing),
            "modes": {},
        }
        for mode in modes:
            started = time.perf_counter()
            hits = coordinator.search_episodes(ing.user_id, q.question, limit=max_k, mode=mode)
            latencies[mode].append((time.perf_counter() - started) * 1000)
            ranked = [to_session.get(h.episode.id, f"?{h.episode.id}") for h in hits]
            outcome = score_ranking(ranked, q.answer_session_ids, ks, q.superseded_session_ids)
            if q.answer_session_ids:
                outcomes[mode].append((q, outcome))
            detail["modes"][mode] = {
                "ranked": ranked,
                "scores": [h.score for h in hits],
                "first_gold_rank": outcome.first_gold_rank,
                "gold_ranks": outcome.gold_ranks,
                "superseded_rank": outcome.superseded_rank,
                "update_correct": outcome.update_correct,
            }
        questions.append(detail)
    say(f"searched {len(dataset.questions)} questions x {len(modes)} modes")

    types = _type_order(dataset.question_types())
    by_mode: dict[str, Any] = {}
    for mode in modes:
        scored = outcomes[mode]
        lat = sorted(latencies[mode])
        by_mode[mode] = {
            "overall": aggregate([o for _, o in scored], ks),
            "by_type": {
                t: aggregate([o for q, o in scored if q.question_type == t], ks)
                for t in types
                if any(q.question_type == t for q, _ in scored)
            },
            "mean_hits_returned": _mean(len(d["modes"][mode]["ranked"]) for d in questions),
            "questions_with_no_hits": sum(not d["modes"][mode]["ranked"] for d in questions),
            "latency_ms": {
                "mean": round(statistics.fmean(lat), 2) if lat else None,
                "p95": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 2) if lat else None,
            },
        }
    by_type_diag = {}
    for t in types:
        rows = [d for d in questions if d["question_type"] == t]
        by_type_diag[t] = {
            "n": len(rows),
            "question_overlap": _mean(d["question_overlap"] for d in rows if d["question_overlap"] is not None),
            "evidence_retained": _mean(d["evidence_retained"] for d in rows if d["evidence_retained"] is not None),
        }
    return {
        "dataset": {
            "name": dataset.name,
            "source_format": dataset.source_format,
            "haystacks": len(dataset.haystacks),
            "sessions": len(all_sessions),
            "questions": len(dataset.questions),
            "unscored_questions": [q.question_id for q in dataset.questions if not q.answer_session_ids],
            "question_types": dict(Counter(q.question_type for q in dataset.questions)),
            "diagnostics_by_type": by_type_diag,
        },
        "settings": {
            "ks": ks,
            "modes": list(modes),
            "limit": max_k,
            "embedder": coordinator.semantic.embedder.name if embedder_ok else None,
            "summariser": coordinator.summariser.name,
            "similarity_threshold": coordinator.settings.similarity_threshold,
            "default_mode": coordinator.settings.search_mode,
            "query_expansion": coordinator.settings.query_expansion,
        },
        "ingestion": {
            "sessions": len(all_sessions),
            "saved": len(all_sessions) - len(skipped),
            "skipped": len(skipped),
            "skipped_reasons": dict(Counter(s.reason for s in skipped)),
            "gold_sessions_skipped": [f"{h}/{s}" for h, s in gold_skipped],
            "questions_with_skipped_gold": [
                q.question_id
                for q in dataset.questions
                if any(not ingests[q.haystack_id].sessions[s].saved for s in q.answer_session_ids)
            ],
            "episode_timestamp_mismatches": sum(s.timestamp_ok is False for s in all_sessions),
            "seconds": round(ingest_s, 1),
            "sessions_detail": {hid: [asdict(s) for s in ing.sessions.values()] for hid, ing in ingests.items()},
        },
        "modes": by_mode,
        "questions": questions,
    }


def make_settings(
    redis_url: str,
    key_prefix: str,
    work_dir: Path,
    from_env: bool = False,
    similarity_threshold: float | None = None,
) -> Settings:
    """Offline defaults (no LLM, bundled ONNX embedder), or the environment's settings."""
    if from_env:
        settings = Settings.from_env().with_overrides(redis_url=redis_url, key_prefix=key_prefix)
    else:
        settings = Settings(
            redis_url=redis_url, key_prefix=key_prefix, data_dir=work_dir / "data", config_dir=work_dir / "config"
        )
    if similarity_threshold is not None:
        settings = settings.with_overrides(similarity_threshold=similarity_threshold)
    return settings


def delete_prefix(redis_url: str, prefix: str) -> int:
    """Delete every key under ``prefix:``; returns how many."""
    client = redis.Redis.from_url(redis_url)
    removed, batch = 0, []
    try:
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                removed += client.unlink(*batch)
                batch = []
        if batch:
            removed += client.unlink(*batch)
    finally:
        client.close()
    return removed


def run(
    dataset: Dataset,
    redis_url: str = DEFAULT_REDIS_URL,
    ks: Sequence[int] = (1, 5, 10),
    modes: Sequence[str] = SEARCH_MODES,
    from_env: bool = False,
    progress: Callable[[str], None] | None = None,
    key_prefix: str | None = None,
    similarity_threshold: float | None = None,
) -> dict[str, Any]:
    """``evaluate`` under a throw-away key prefix that is deleted afterwards, whatever happens."""
    prefix = key_prefix or f"agtos-eval-{uuid.uuid4().hex[:10]}"
    work_dir = Path(tempfile.mkdtemp(prefix="agtos-eval-"))
    coordinator: MemoryCoordinator | None = None
    try:
        coordinator = MemoryCoordinator(make_settings(redis_url, prefix, work_dir, from_env, similarity_threshold))
        results = evaluate(dataset, coordinator, ks, modes, progress)
        results["settings"]["key_prefix"] = prefix
        return results
    finally:
        if coordinator is not None:
            coordinator.close()
        removed = delete_prefix(redis_url, prefix)
        if progress:
            progress(f"deleted {removed} Redis keys under {prefix}:")
        shutil.rmtree(work_dir, ignore_errors=True)


# -- report -----------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def render_markdown(results: dict[str, Any], max_misses: int = 25) -> str:
    ds, ing, st = results["dataset"], results["ingestion"], results["settings"]
    ks = st["ks"]
    affected = ing["questions_with_skipped_gold"]
    lines = [
        f"## Long-memory retrieval eval: {ds['name']}",
        "",
        f"- dataset: {ds['haystacks']} haystacks, {ds['sessions']} sessions, {ds['questions']} questions"
        + (f" ({len(ds['unscored_questions'])} without gold, unscored)" if ds["unscored_questions"] else ""),
        f"- ingestion (add_turn → end_session): {ing['saved']} episodes saved, {ing['skipped']} sessions skipped "
        f"by the save heuristics ({', '.join(f'{r}: {n}' for r, n in ing['skipped_reasons'].items()) or 'none'}), "
        f"{ing['seconds']} s",
        f"- gold sessions skipped: {len(ing['gold_sessions_skipped'])}"
        + (f" (questions {', '.join(affected)})" if affected else ""),
        f"- embedder: {st['embedder'] or 'UNAVAILABLE (vector/hybrid fell back to BM25)'}; summariser: "
        f"{st['summariser']}; search limit {st['limit']}; vector similarity threshold {st['similarity_threshold']}",
        "",
        "| question type | n | question overlap | evidence retained |",
        "|---|---:|---:|---:|",
    ]
    for t, d in ds["diagnostics_by_type"].items():
        lines.append(f"| {t} | {d['n']} | {_pct(d['question_overlap'])} | {_pct(d['evidence_retained'])} |")
    lines += [
        "",
        "_question overlap_: share of the question's content words found in its gold sessions; "
        "_evidence retained_: share of the evidence turns' content words present in the stored episode text.",
    ]
    header = ["question type", "n", *[f"R_any@{k}" for k in ks], *[f"R_all@{k}" for k in ks], "MRR"]
    for mode, m in results["modes"].items():
        lines += ["", f"### mode: {mode}", "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
        rows = [*m["by_type"].items(), ("**all**", m["overall"])]
        for name, agg in rows:
            cells = [
                name,
                str(agg["n"]),
                *[_pct(agg[f"recall_any@{k}"]) for k in ks],
                *[_pct(agg[f"recall_all@{k}"]) for k in ks],
                _pct(agg["mrr"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        up = m["overall"]["update"]
        if up["n"]:
            lines += [
                "",
                f"update accuracy (later session retrieved and ranked above the superseded one, top {st['limit']}): "
                f"{up['correct']}/{up['n']} = {_pct(up['accuracy'])}; superseded ranked above gold: "
                f"{up['superseded_above_gold']}; gold not retrieved: {up['gold_not_retrieved']}",
            ]
        lines.append(
            f"hits returned per question: mean {m['mean_hits_returned']} (limit {st['limit']}), "
            f"{m['questions_with_no_hits']} questions with none; "
            f"search latency: mean {m['latency_ms']['mean']} ms, p95 {m['latency_ms']['p95']} ms"
        )
    modes = list(results["modes"])
    lines += [
        "",
        "### summary",
        "",
        "| mode | " + " | ".join([*[f"R_any@{k}" for k in ks], f"R_all@{ks[-1]}", "MRR", "update acc"]) + " |",
        "|---|" + "---:|" * (len(ks) + 3),
    ]
    for mode in modes:
        o = results["modes"][mode]["overall"]
        cells = [
            *[_pct(o[f"recall_any@{k}"]) for k in ks],
            _pct(o[f"recall_all@{ks[-1]}"]),
            _pct(o["mrr"]),
            _pct(o["update"]["accuracy"]),
        ]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    for mode in modes:
        misses = [
            q
            for q in results["questions"]
            if (q["gold"] and q["modes"][mode]["first_gold_rank"] is None)
            or q["modes"][mode]["update_correct"] is False
        ]
        if not misses:
            continue
        lines += ["", f"misses in {mode} (gold not in top {st['limit']}, or superseded session ranked first):"]
        for q in misses[:max_misses]:
            r = q["modes"][mode]
            why = (
                "gold not retrieved"
                if r["first_gold_rank"] is None
                else f"superseded at {r['superseded_rank']}, gold at {r['first_gold_rank']}"
            )
            lines.append(f"- {q['question_id']} [{q['question_type']}] {q['question']} ({why})")
        if len(misses) > max_misses:
            lines.append(f"- … {len(misses) - max_misses} more in the JSON results")
    return "\n".join(lines) + "\n"


# -- CLI --------------------------------------------------------------------------------
def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k must be comma-separated integers, not {text!r}") from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("--k values must be positive")
    return ks


def _modes(text: str) -> list[str]:
    modes = list(dict.fromkeys(m.strip().lower() for m in text.split(",") if m.strip()))
    bad = [m for m in modes if m not in SEARCH_MODES]
    if not modes or bad:
        raise argparse.ArgumentTypeError(f"--modes must be a comma-separated subset of {','.join(SEARCH_MODES)}")
    return modes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval.harness", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET, help="evaluation set (JSON)")
    parser.add_argument("--k", type=_ks, default=[1, 5, 10], help="cut-offs, e.g. 1,5,10")
    parser.add_argument("--modes", type=_modes, default=list(SEARCH_MODES), help="e.g. hybrid,vector,bm25")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--out", type=Path, help="results JSON (default benchmarks/results/eval-<dataset>.json)")
    parser.add_argument("--from-env", action="store_true", help="settings from the environment (LLM slots …)")
    parser.add_argument(
        "--similarity-threshold",
        type=float,
        help="override the minimum cosine similarity of vector hits (library default 0.15)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    try:
        dataset = load_dataset(args.dataset)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    stamp = Stamp()
    try:
        results = run(
            dataset,
            args.redis_url,
            args.k,
            args.modes,
            args.from_env,
            progress,
            similarity_threshold=args.similarity_threshold,
        )
    except KeyboardInterrupt:
        print("interrupted; Redis keys cleaned up", file=sys.stderr)
        return 130
    except (redis.exceptions.ConnectionError, StorageUnavailable) as exc:
        print(f"error: cannot reach Redis at {args.redis_url}: {exc}", file=sys.stderr)
        return 3
    results["dataset"]["path"] = str(args.dataset)
    results["stamp"] = stamp.done()
    out = args.out or RESULTS_DIR / f"eval-{args.dataset.stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(render_markdown(results))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
