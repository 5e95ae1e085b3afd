"""Dialectic /ask quality: answers, abstentions and the relevance floor (issue 16).

Replays ``ask_set.json`` (synthetic sessions, questions with and without an answer) through
``add_turn`` / ``end_session``, asks every question, and prints answer accuracy, abstention
precision and recall at the configured floor and across a sweep of floors. With ``--realtalk``
it also replays the dev set's conversations and reports how often /ask abstains on their
(answerable) questions.

    nice -n 10 .venv/bin/python -m benchmarks.eval.ask_eval [--realtalk PATH] [--limit 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Role, Turn
from agtos.tasks.answer_builder import RELEVANCE_FLOOR
from benchmarks.eval.harness import (
    DEFAULT_REDIS_URL,
    TURN_SPACING_MS,
    agtos_session_id,
    agtos_user_id,
    delete_prefix,
    make_settings,
)
from benchmarks.eval.profile_quality import DEFAULT_DATASET

ASK_SET = Path(__file__).with_name("ask_set.json")
FLOORS = [round(0.25 + 0.025 * i, 3) for i in range(13)]


def replay_ask_set(coordinator: MemoryCoordinator, data: dict[str, Any]) -> None:
    start = 1_704_067_200_000  # 2024-01-01
    for u in data["users"]:
        for n, session in enumerate(u["sessions"]):
            sid = f"s{n}"
            for i, (role, content) in enumerate(session):
                when = start + n * 86_400_000 + i * TURN_SPACING_MS
                coordinator.add_turn(u["user_id"], sid, Turn(role=Role(role), content=content, timestamp=when))
            coordinator.end_session(u["user_id"], sid)


def ask_rows(coordinator: MemoryCoordinator, data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for q in data["questions"]:
        body = coordinator.ask(q["user_id"], q["question"])
        gold = q["answer_contains"]
        rows.append(
            {
                "question": q["question"],
                "answerable": gold is not None,
                "relevance": body["relevance"],
                "answered": body["answered"],
                "correct": gold is not None and any(g.lower() in body["answer"].lower() for g in gold),
                "answer": body["answer"],
            }
        )
    return rows


def scores(rows: list[dict[str, Any]], floor: float) -> dict[str, float]:
    """At ``floor``: accuracy over all questions (answerable: answered and right; unanswerable:
    abstained), and the precision and recall of abstaining."""
    answered = [r["relevance"] >= floor for r in rows]
    right = [(a and r["correct"]) if r["answerable"] else not a for r, a in zip(rows, answered, strict=True)]
    abstained = [not a for a in answered]
    true_abstain = sum(1 for r, x in zip(rows, abstained, strict=True) if x and not r["answerable"])
    unanswerable = sum(1 for r in rows if not r["answerable"])
    return {
        "floor": floor,
        "accuracy": round(sum(right) / len(rows), 3),
        "answerable_correct": round(
            sum(1 for r, a in zip(rows, answered, strict=True) if r["answerable"] and a and r["correct"])
            / max(1, len(rows) - unanswerable),
            3,
        ),
        "abstain_precision": round(true_abstain / max(1, sum(abstained)), 3),
        "abstain_recall": round(true_abstain / max(1, unanswerable), 3),
    }


def realtalk_abstention(coordinator: MemoryCoordinator, path: Path, limit: int | None) -> dict[str, Any]:
    from benchmarks.eval.dataset import load_dataset

    dataset = load_dataset(path)
    asked = abstained = 0
    for haystack in dataset.haystacks[:limit]:
        user_id = agtos_user_id(haystack.haystack_id)
        stamps = haystack.session_timestamps_ms()
        for i in sorted(range(len(stamps)), key=lambda i: (stamps[i], i)):
            sid = agtos_session_id(haystack.haystack_session_ids[i])
            turns = [t for t in haystack.haystack_sessions[i] if t.content.strip()]
            for n, t in enumerate(turns):
                when = stamps[i] + n * TURN_SPACING_MS
                coordinator.add_turn(
                    user_id, sid, Turn(role=Role(t.role), content=t.content, name=t.name, timestamp=when)
                )
            if turns:
                coordinator.end_session(user_id, sid)
        for q in dataset.questions:
            if q.haystack_id == haystack.haystack_id:
                asked += 1
                abstained += not coordinator.ask(user_id, q.question)["answered"]
    return {"questions": asked, "abstained": abstained, "rate": round(abstained / max(1, asked), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realtalk", type=Path, nargs="?", const=DEFAULT_DATASET, default=None)
    parser.add_argument("--limit", type=int, default=None, help="dev-set conversations to replay")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS_URL)
    parser.add_argument("--show", action="store_true", help="print every question's answer")
    args = parser.parse_args(argv)
    data = json.loads(ASK_SET.read_text())
    prefix = f"agtos-ask-{uuid.uuid4().hex[:10]}"
    work_dir = Path(tempfile.mkdtemp(prefix="agtos-ask-"))
    coordinator = MemoryCoordinator(make_settings(args.redis_url, prefix, work_dir))
    try:
        replay_ask_set(coordinator, data)
        rows = ask_rows(coordinator, data)
        dev = None
        if args.realtalk is not None and args.realtalk.exists():
            dev = realtalk_abstention(coordinator, args.realtalk, args.limit)
        elif args.realtalk is not None:
            print(f"optional dataset: {args.realtalk} is absent")
    finally:
        coordinator.close()
        delete_prefix(args.redis_url, prefix)
        shutil.rmtree(work_dir, ignore_errors=True)
    answerable = sum(r["answerable"] for r in rows)
    print(f"ask set: {answerable} answerable, {len(rows) - answerable} unanswerable questions")
    print("| floor | accuracy | answerable answered right | abstention precision | abstention recall |")
    print("|---|---|---|---|---|")
    for floor in sorted({*FLOORS, RELEVANCE_FLOOR}):
        s = scores(rows, floor)
        mark = " (current)" if floor == RELEVANCE_FLOOR else ""
        print(
            f"| {floor}{mark} | {s['accuracy']} | {s['answerable_correct']} | {s['abstain_precision']} "
            f"| {s['abstain_recall']} |"
        )
    if args.show:
        for r in rows:
            kind = "A" if r["answerable"] else "-"
            print(f"{r['relevance']:.3f} {kind} {r['correct']!s:5} {r['question']} -> {r['answer']}")
    if dev is not None:
        print(f"\nrealtalk-dev: /ask abstained on {dev['abstained']} of {dev['questions']} questions ({dev['rate']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
