"""CPU per context assembly (issue 15): ``turn_items`` + ``assemble`` over candidates built from
realtalk-dev (read in place), as ``/api/memory/context`` makes them (budget 800, 32 matched turns with
a neighbour each side, 10 facts, 10 episode summaries), timed by ``time.process_time`` beside a
baseline: the same code at another git revision, run in the same process, whose texts must be
byte-identical.

    .venv/bin/python -m benchmarks.context_cpu --baseline HEAD --contexts 200

``--key-prefix P``: the whole ``build_context`` (recall included) instead, for every question of the
conversations that ``benchmarks.eval.api_eval --key-prefix P`` replayed and kept, at budgets 800,
1000 and 2000, the baseline's functions swapped into ``agtos.memory.context_builder``; every
response (text, tokens, items) must be the same.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from agtos.schemas import Role, StoredTurn
from agtos.tasks.bm25 import query_terms

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json"


def _module_at(rev: str) -> ModuleType:
    """``agtos.tasks.context`` as it was at git revision ``rev``, under another name."""
    source = subprocess.run(
        ["git", "show", f"{rev}:agtos/tasks/context.py"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "context_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("context_baseline", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["context_baseline"] = module
    spec.loader.exec_module(module)
    return module


def _cases(dataset: Path, contexts: int) -> list[dict[str, Any]]:
    """Per question: its 32 best turns by shared query terms (each with its window), facts, summaries."""
    cases: list[dict[str, Any]] = []
    for n, sample in enumerate(json.loads(dataset.read_text())):
        conv = sample["conversation"]
        turns: list[StoredTurn] = []
        sessions: dict[str, list[StoredTurn]] = {}
        for key, value in conv.items():
            if not key.startswith("session_") or not isinstance(value, list):
                continue
            for pos, t in enumerate(value):
                ts = int(datetime.fromisoformat(t["timestamp"]).timestamp() * 1000) if t.get("timestamp") else 0
                turn = StoredTurn(
                    user_id="u",
                    episode_id=f"ep{n}-{key}",
                    session_id=key,
                    position=pos,
                    role=Role.user,
                    name=t["speaker"],
                    content=t["text"] or ".",
                    timestamp=ts,
                )
                turns.append(turn)
                sessions.setdefault(key, []).append(turn)
        facts: list[tuple[str, str, int]] = []
        summaries: list[tuple[str, str, int]] = []
        for key, value in sample.get("event_summary", {}).items():
            sess = sessions.get(key.replace("events_", ""))
            when = sess[0].timestamp if sess else 0
            lines = [x for agent in value.values() if isinstance(agent, list) for x in agent if isinstance(x, str)]
            facts += [(f"{key}-{i}", x, when) for i, x in enumerate(lines)]
            if lines:
                summaries.append((key, " ".join(lines), when))
        for qa in sample["qa"]:
            terms = set(query_terms(qa["question"]))

            def score(text: str, terms: set[str] = terms) -> int:
                return len(terms & set(query_terms(text)))

            hits = sorted(turns, key=lambda t: -score(t.content))[:32]
            windows = [(h, sessions[h.session_id][max(0, h.position - 1) : h.position + 2]) for h in hits]
            cases.append(
                {
                    "query": qa["question"],
                    "windows": windows,
                    "facts": sorted(facts, key=lambda f: -score(f[1]))[:10],
                    "summaries": sorted(summaries, key=lambda f: -score(f[1]))[:10],
                }
            )
            if len(cases) >= contexts:
                return cases
    return cases


def run(module: ModuleType, case: dict[str, Any], budget: int = 800) -> str:
    """One context's text (and tokens); the module's own memos (``lru_cache``) start empty, so a
    context gains only from what it asks twice itself (the token counts' memo, shared, stays)."""
    for value in vars(module).values():
        if hasattr(value, "cache_clear") and value.__module__ == module.__name__:
            value.cache_clear()
    items = []
    for rank, (hit, window) in enumerate(case["windows"]):
        items += module.turn_items(window, hit, 1.0 / (1 + rank), case["query"])
    for rank, (fid, text, when) in enumerate(case["facts"]):
        until = when + 1 if rank % 4 == 3 else None  # every fourth fact superseded
        items.append(module.ContextItem("semantic", fid, text, 1.0 / (1 + rank), when, until=until))
    for rank, (sid, text, when) in enumerate(case["summaries"]):
        items.append(module.ContextItem("episodic", sid, text, 1.0 / (1 + rank), when, sid, sid))
    _, text, used = module.assemble(items, budget)
    return f"{used}\n{text}"


def _swap(builder: ModuleType, module: ModuleType) -> None:
    """``module``'s assembly functions (and item class) as those ``context_builder`` calls."""
    for name in ("assemble", "turn_items", "ContextItem"):
        setattr(builder, name, getattr(module, name))


def stored(baseline: ModuleType, current: ModuleType, key_prefix: str, dataset: Path, rounds: int) -> str:
    """Full contexts over a replayed dataset kept under ``key_prefix``: responses differing, CPU per context."""
    from benchmarks.eval.harness import DEFAULT_REDIS_URL, agtos_user_id, make_settings  # isort: skip

    import agtos.memory.context_builder as builder
    from agtos.memory.coordinator import MemoryCoordinator
    from benchmarks.eval.dataset import load_dataset

    data = load_dataset(dataset)
    users = {h.haystack_id: agtos_user_id(h.haystack_id) for h in data.haystacks}
    coordinator = MemoryCoordinator(
        make_settings(DEFAULT_REDIS_URL, f"{key_prefix}-{dataset.stem}", Path(tempfile.mkdtemp()))
    )
    kept = [q for q in data.questions if coordinator.build_context(users[q.haystack_id], q.question)["items"]]

    def context(module: ModuleType, question: Any, budget: int) -> str:
        _swap(builder, module)
        body = coordinator.build_context(users[question.haystack_id], question.question[:1_000], budget_tokens=budget)
        return json.dumps(body, sort_keys=True)

    try:
        pairs = [(q, b) for q in kept for b in (800, 1_000, 2_000)]
        differ = sum(context(baseline, q, b) != context(current, q, b) for q, b in pairs)
        best = {"baseline": float("inf"), "current": float("inf")}
        for _ in range(rounds):
            for name, module in (("baseline", baseline), ("current", current)):
                start = time.process_time()
                for q in kept:
                    context(module, q, 800)
                best[name] = min(best[name], (time.process_time() - start) / len(kept) * 1000)
    finally:
        _swap(builder, current)
        coordinator.close()
    return (
        f"{len(pairs)} stored contexts ({len(kept)} questions with evidence x 3 budgets), responses differing: "
        f"{differ}; build_context CPU per context (budget 800, best of {rounds}): baseline {best['baseline']:.2f} ms, "
        f"current {best['current']:.2f} ms, ratio {best['current'] / best['baseline']:.2f}; "
        f"load {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", default="HEAD", help="git revision of agtos/tasks/context.py to compare with")
    parser.add_argument("--contexts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds; the best CPU time of each is kept")
    parser.add_argument("--profile", action="store_true", help="cProfile the current code instead")
    parser.add_argument("--key-prefix", help="full contexts over what api_eval --key-prefix kept (see above)")
    parser.add_argument("--dataset", type=Path, default=Path(__file__).parent / "eval" / "convset.json")
    args = parser.parse_args()
    import agtos.tasks.context as current

    baseline = _module_at(args.baseline)
    if args.key_prefix:
        print(stored(baseline, current, args.key_prefix, args.dataset, args.rounds))
        return
    cases = _cases(DATASET, args.contexts)
    for module in (baseline, current):  # warm the memos (tokens, dates) both share, then compare
        for case in cases:
            run(module, case)
    if args.profile:
        import cProfile
        import pstats

        stats = str(Path(tempfile.mkdtemp()) / "context.prof")
        cProfile.runctx("for c in cases: run(current, c)", globals(), {"cases": cases, "current": current}, stats)
        pstats.Stats(stats).sort_stats("tottime").print_stats(20)
        return
    differ = sum(run(baseline, c) != run(current, c) for c in cases)
    best = {"baseline": float("inf"), "current": float("inf")}
    for _ in range(args.rounds):
        for name, module in (("baseline", baseline), ("current", current)):
            start = time.process_time()
            for case in cases:
                run(module, case)
            best[name] = min(best[name], (time.process_time() - start) / len(cases) * 1000)
    print(
        f"{len(cases)} contexts, texts differing: {differ}; CPU per context (best of {args.rounds}): "
        f"baseline {args.baseline} {best['baseline']:.3f} ms, current {best['current']:.3f} ms, "
        f"ratio {best['current'] / best['baseline']:.2f}; load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
