"""The user/assistant set with long replies (``assistset.json``): generator, shape, evidence, dates."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import dateparser

from benchmarks.eval import api_eval, make_assistset
from benchmarks.eval.answers import answer_present
from benchmarks.eval.dataset import load_dataset

ASSISTSET = Path(__file__).resolve().parents[1] / "benchmarks" / "eval" / "assistset.json"
EVIDENCE = re.compile(r"^D(\d+):(\d+)$")


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ASSISTSET.read_text(encoding="utf-8"))
    return data


def _evidence(data: dict[str, Any], question: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(session date, turn) for each evidence id of the question."""
    haystack = next(h for h in data["haystacks"] if h["haystack_id"] == question["haystack_id"])
    out = []
    for ev in question["evidence"]:
        match = EVIDENCE.match(ev)
        assert match, ev
        s, t = int(match[1]) - 1, int(match[2]) - 1
        out.append((haystack["haystack_dates"][s], haystack["haystack_sessions"][s][t]))
    return out


def test_assistset_matches_its_generator() -> None:
    assert ASSISTSET.read_text(encoding="utf-8") == make_assistset.render(make_assistset.build())


def test_assistset_check_flag(tmp_path: Path) -> None:
    assert make_assistset.main(["--check", "--out", str(ASSISTSET)]) == 0
    stale = tmp_path / "stale.json"
    stale.write_text("{}\n", encoding="utf-8")
    assert make_assistset.main(["--check", "--out", str(stale)]) == 1


def test_assistset_has_long_list_replies() -> None:
    """Every session opens with a user request and a 150-500 word numbered or bulleted assistant reply."""
    data = _data()
    assert len(data["haystacks"]) == 6
    for haystack in data["haystacks"]:
        assert len(haystack["haystack_sessions"]) == 30
        for session in haystack["haystack_sessions"]:
            assert [t["role"] for t in session[:2]] == ["user", "assistant"]
            words = len(session[1]["content"].split())
            assert 150 <= words <= 500, words
            assert len(re.findall(r"^(?:\d+\.|-) ", session[1]["content"], re.M)) >= 5


def test_assistset_evidence_holds_the_answer() -> None:
    """Each answer (but the dated ones) is in its evidence turns; assistant questions cite the reply."""
    data = _data()
    kinds = {api_eval.kind_of(q["question_type"]) for q in data["questions"]}
    assert kinds == {"single-hop", "multi-hop", "temporal", "update"}
    types = {q["question_type"] for q in data["questions"]}
    assert {"single-session-assistant", "single-session-user", "single-session-preference"} <= types
    for q in data["questions"]:
        turns = [turn for _, turn in _evidence(data, q)]
        assert all(t.get("has_answer") for t in turns), q
        if q["question_type"] == "single-session-assistant":
            assert [t["role"] for t in turns] == ["assistant"], q
        if q["question_type"] == "multi-session":
            assert len(q["answer_session_ids"]) == 2, q
        if q["question_type"] == "knowledge-update":
            assert q["superseded_session_ids"] < q["answer_session_ids"], q
        if not re.search(r"\d{4}$", q["answer"]):
            assert answer_present(q["answer"], " ".join(t["content"] for t in turns)), q


def test_assistset_dates_resolve_the_relative_expressions() -> None:
    """Each dated answer is the evidence turn's relative expression resolved by dateparser from the session date."""
    data, checked = _data(), 0
    relative = re.compile(r"\b(yesterday|two days ago|three days ago|last \w+day)\b")
    for q in (q for q in _data()["questions"] if re.search(r"\d{4}$", q["answer"])):
        ((when, turn),) = _evidence(data, q)
        match = relative.search(turn["content"])
        assert match, q
        base = datetime.strptime(when, make_assistset.DATE_FMT)
        resolved = dateparser.parse(match[1], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": "past"})
        assert resolved is not None and resolved.date() == datetime.strptime(q["answer"], "%d %B %Y").date(), q
        checked += 1
    assert checked >= 10


def test_assistset_loads_through_the_loader() -> None:
    data = load_dataset(ASSISTSET)
    assert len(data.haystacks) == 6 and len(data.questions) >= 100
    assert sum(len(h.haystack_sessions) for h in data.haystacks) == 180
