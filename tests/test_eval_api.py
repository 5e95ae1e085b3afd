"""The conversation eval: the answer rule, the raw-turn baselines, the synthetic set, a tiny API run."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import dateparser
import pytest
import redis

from benchmarks.eval import api_eval, make_convset
from benchmarks.eval.answers import answer_present
from benchmarks.eval.baselines import RawTurn, RawTurnRetriever, fill_budget
from benchmarks.eval.dataset import load_dataset, parse_dataset
from benchmarks.eval.harness import delete_prefix

CONVSET = Path(__file__).resolve().parents[1] / "benchmarks" / "eval" / "convset.json"
REALTALK = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json"
NO_REALTALK = f"optional dataset: realtalk-dev (not redistributable) is not at {REALTALK}"


# -- the answer rule ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "text", "present"),
    [
        ("7 May 2023", "(May 7th, 2023) Gina: we moved", True),
        ("May 7, 2023", "on 07 May, 2023 we moved", True),
        ("7 May 2023", "stored 2023-05-07", True),
        ("On 07.05.2023", "(7 May 2023) Gina: we moved", True),  # day first, with dots
        ("On 05.07.2023", "(7 May 2023) Gina: we moved", False),
        ("May 2023", "(7 May 2023) Gina: hi", True),  # a month answer in a full date
        ("2023", "(7 May 2023) Gina: hi", True),
        ("7 May 2023", "(8 May 2023) Gina: I moved yesterday", False),  # unresolved relative date
        ("7 May 2023", "(May 2023) we moved", False),  # a day answer needs the day
        ("2 days", "I had the flu for two days", True),
        ("Cooking, skiing, hiking", "she likes hiking, skiing and cooking", True),
        ("Cooking, skiing, hiking", "she likes hiking and cooking", False),  # 2 of 3 < 80 %
        ("New York, Boston, Marrakesh, Chefchaouen, Lisbon", "Lisbon, Boston, Chefchaouen and New York", True),
        ("Kate's dogs", "Kate dog walker", True),  # possessive and plural
        ("Café Lumière", "dinner at cafe lumiere", True),
        ("No", "No, she works 40 hours", True),
        ("No", "nothing known", False),
        ("", "anything", False),
    ],
)
def test_answer_present(answer: str, text: str, present: bool) -> None:
    assert answer_present(answer, text) is present


# -- the baselines --------------------------------------------------------------------------------
def test_raw_turn_line_and_budget() -> None:
    turn = RawTurn("s1", "D1:3", "Gina", 1_683_554_160_000, "I lost my job at Door Dash.")  # 2023-05-08 13:56 UTC
    assert turn.line == "(8 May 2023) Gina: I lost my job at Door Dash."
    lines = ["alpha beta", "word " * 50, "gamma"]
    assert fill_budget(lines, 10) == "alpha beta\ngamma"  # the long line is skipped, the next one fits
    assert fill_budget(lines, 1) == ""


def test_baselines_rank_the_turn_that_answers() -> None:
    turns = [
        RawTurn("s1", "D1:1", "Gina", 1_683_554_160_000, "Hey Jon, how are you?"),
        RawTurn("s1", "D1:2", "Jon", 1_683_554_190_000, "My dance studio opened downtown."),
        RawTurn("s2", "D2:1", "Gina", 1_684_554_160_000, "We adopted a kitten called Pumpernickel."),
    ]
    retriever = RawTurnRetriever(turns, embedder=None)
    assert retriever.bm25("Pumpernickel kitten")[0] == 2
    assert retriever.bm25("the of") == []  # stop words only: nothing matches
    assert not retriever.has_dense and retriever.dense("kitten") == []


# -- the synthetic set ------------------------------------------------------------------------------
def test_convset_matches_its_generator() -> None:
    assert CONVSET.read_text(encoding="utf-8") == make_convset.render(make_convset.build())


def _turns(sample: dict[str, Any]) -> dict[str, dict[str, Any]]:
    conv = sample["conversation"]
    return {t["dia_id"]: t for key, value in conv.items() if isinstance(value, list) for t in value}


def test_convset_shape() -> None:
    samples = json.loads(CONVSET.read_text(encoding="utf-8"))
    assert len(samples) >= 3
    for sample in samples:
        conv, turns = sample["conversation"], _turns(sample)
        speakers = {conv["speaker_a"], conv["speaker_b"]}
        dates = [
            dateparser.parse(conv[f"session_{n}_date_time"]) for n in range(1, 100) if f"session_{n}_date_time" in conv
        ]
        assert len(dates) >= 20 and dates == sorted(dates), sample["sample_id"]
        assert {t["speaker"] for t in turns.values()} == speakers
        assert {q["category"] for q in sample["qa"]} == {1, 2, 3, 4}
        owners = {turns[e]["speaker"] for q in sample["qa"] for e in q["evidence"]}
        assert owners == speakers, "facts stated by both speakers"
        texts = " ".join(t["text"].lower() for t in turns.values())
        for phrase in ("yesterday", "last ", "ago", "next month", "hey"):
            assert phrase in texts, (sample["sample_id"], phrase)
        now_questions = [q for q in sample["qa"] if q["question"].endswith(" now?")]
        assert now_questions, "updated facts are asked about"
        for q in sample["qa"]:
            assert q["evidence"] and all(e in turns for e in q["evidence"]), q
            evidence = " ".join(turns[e]["text"] for e in q["evidence"])
            if q["category"] in (1, 4):
                assert answer_present(q["answer"], evidence), q
            if q["category"] == 1:
                assert len(q["evidence"]) >= 2, q


def test_convset_temporal_answers_resolve_the_relative_dates() -> None:
    """Every temporal answer is the turn's relative expression resolved by dateparser from the turn's date."""
    checked = 0
    for sample in json.loads(CONVSET.read_text(encoding="utf-8")):
        turns = _turns(sample)
        for q in (q for q in sample["qa"] if q["category"] == 2):
            turn = turns[q["evidence"][0]]
            assert q["relative"].lower() in turn["text"].lower(), q
            base = datetime.fromisoformat(turn["timestamp"])
            resolved = dateparser.parse(q["relative"], settings={"RELATIVE_BASE": base})
            answer = dateparser.parse(q["answer"], settings={"PREFER_DAY_OF_MONTH": "first"})
            assert resolved is not None and answer is not None, q
            if q["answer"].isdigit():  # "2013"
                assert resolved.year == int(q["answer"]), q
            elif len(q["answer"].split()) == 2:  # "June 2023"
                assert (resolved.year, resolved.month) == (answer.year, answer.month), q
            else:
                assert resolved.date() == answer.date(), q
            checked += 1
    assert checked >= 40


def test_convset_loads_through_the_locomo_loader() -> None:
    data = load_dataset(CONVSET)
    assert data.source_format == "locomo" and len(data.haystacks) == 4
    turn = data.haystacks[0].haystack_sessions[0][0]
    assert turn.name in ("Gina", "Jon") and turn.dia_id == "D1:1" and turn.timestamp
    assert turn.role == ("user" if turn.name == "Gina" else "assistant")
    kinds = {api_eval.kind_of(q.question_type) for q in data.questions}
    assert kinds == {"single-hop", "multi-hop", "temporal", "open-domain"}
    small = api_eval.limit_dataset(data, 1, 5)
    assert len(small.haystacks) == 1 and len(small.questions) == 5
    assert {q.haystack_id for q in small.questions} == {data.haystacks[0].haystack_id}


# -- the real dev set (read from ../shared, never copied) -------------------------------------------
@pytest.mark.skipif(not REALTALK.exists(), reason=NO_REALTALK)
def test_realtalk_loads() -> None:
    data = load_dataset(REALTALK)
    assert len(data.haystacks) == 4 and len(data.questions) == 284
    first = data.haystacks[0].haystack_sessions[0][0]
    assert (first.name, first.role, first.dia_id, first.timestamp) == ("Emi", "user", "D1:1", "2023-12-29T22:42:04")
    assert {api_eval.kind_of(q.question_type) for q in data.questions} == {"multi-hop", "temporal", "open-domain"}


def test_cli_skips_a_missing_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert api_eval.main(["--dataset", str(tmp_path / "absent.json"), "--out-dir", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().err and not list(tmp_path.iterdir())


# -- a tiny run through the API ----------------------------------------------------------------------
def tiny_locomo() -> list[dict[str, Any]]:
    def turn(dia: str, speaker: str, text: str) -> dict[str, str]:
        return {"speaker": speaker, "dia_id": dia, "text": text}

    def qa(question: str, answer: str, evidence: list[str], category: int) -> dict[str, Any]:
        return {"question": question, "answer": answer, "evidence": evidence, "category": category}

    return [
        {
            "sample_id": "tiny",
            "conversation": {
                "speaker_a": "Gina",
                "speaker_b": "Jon",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    turn("D1:1", "Gina", "Hey Jon!"),
                    turn("D1:2", "Jon", "Hi Gina! How are things?"),
                    turn("D1:3", "Gina", "I lost my job at Door Dash yesterday, feeling pretty low about it."),
                    turn("D1:4", "Jon", "Oh no, sorry to hear that. You'll find something better."),
                ],
                "session_2_date_time": "7:10 pm on 20 May, 2023",
                "session_2": [
                    turn("D2:1", "Jon", "My dance studio Zephyr Steps opened last Friday, first class was packed!"),
                    turn("D2:2", "Gina", "Congrats Jon, that's huge!"),
                ],
                "session_3_date_time": "9:00 am on 2 June, 2023",
                "session_3": [
                    turn("D3:1", "Gina", "We adopted a kitten and named her Pumpernickel."),
                    turn("D3:2", "Jon", "Cute name! Send photos."),
                ],
            },
            "qa": [
                qa("What is Gina's kitten called?", "Pumpernickel", ["D3:1"], 4),
                qa("When did Gina lose her job?", "7 May 2023", ["D1:3"], 2),
                qa("What did Jon open, and where did Gina work?", "Zephyr Steps and Door Dash", ["D1:3", "D2:1"], 1),
            ],
        }
    ]


def test_tiny_run_through_the_api(redis_url: str) -> None:
    dataset = parse_dataset(tiny_locomo(), "tiny")
    prefix = "agtos-test-api-eval-tiny"
    results = api_eval.run(dataset, redis_url, key_prefix=prefix)
    assert not list(redis.Redis.from_url(redis_url).scan_iter(match=f"{prefix}:*"))  # all keys deleted

    assert results["dataset"] == {"name": "tiny", "conversations": 1, "sessions": 3, "turns": 8, "questions": 3}
    ing = results["ingestion"]
    assert ing["saved"] + sum(ing["skipped"].values()) == 3
    by_id = {q["question_id"]: q for q in results["questions"]}
    kitten, job, both = (by_id[f"tiny_q00{i}"] for i in range(3))
    assert [kitten["kind"], job["kind"], both["kind"]] == ["single-hop", "temporal", "multi-hop"]

    bm25 = kitten["systems"]["bm25"]
    assert bm25["ranked"][0] == "tiny_session_3" and bm25["recall"] == {1: True, 5: True, 10: True}
    assert bm25["top"] and bm25["ctx1000"] and bm25["stored"]
    # the raw log says "yesterday" on 8 May: the 7 May answer is nowhere in it
    assert job["systems"]["bm25"]["stored"] is False and job["systems"]["dense"]["stored"] is False
    assert both["systems"]["bm25"]["stored"] is True  # "Zephyr Steps" and "Door Dash" are both in the log
    for q in results["questions"]:  # every agtos hit maps back to a dataset session
        assert all(not s.startswith("?") for s in q["systems"]["agtos"]["ranked"]), q["systems"]["agtos"]["ranked"]
        assert all(t <= b for b, t in zip((1000, 2000), q["systems"]["agtos"]["context_tokens"].values(), strict=True))

    overall = results["summary"]["overall"]
    assert overall["n"] == 3 and overall["bm25"]["recall@1"] is not None
    assert set(overall) >= {"agtos", "bm25", "dense"}
    report = api_eval.render_markdown(results)
    assert "| **overall** | 3 |" in report and "| temporal | 1 |" in report
    assert "answer in 1,000-token context" in report


def test_a_kept_prefix_is_scored_again_without_replaying(redis_url: str) -> None:
    dataset = parse_dataset(tiny_locomo(), "tiny")
    prefix = f"agtos-test-api-eval-kept-{uuid.uuid4().hex[:8]}"
    try:
        first = api_eval.run(dataset, redis_url, key_prefix=prefix, keep=True)
        assert list(redis.Redis.from_url(redis_url).scan_iter(match=f"{prefix}:*", count=1000))  # kept
        again = api_eval.run(dataset, redis_url, key_prefix=prefix, keep=True)
    finally:
        delete_prefix(redis_url, prefix)
    assert first["ingestion"]["replayed"] is True and first["ingestion"]["saved"] == 3
    assert again["ingestion"]["replayed"] is False and again["ingestion"]["saved"] == 0
    assert "scored again (--key-prefix)" in api_eval.render_markdown(again)
    # the same stored conversations: the same sessions found for every question
    assert [q["systems"]["agtos"]["ranked"] for q in again["questions"]] == [
        q["systems"]["agtos"]["ranked"] for q in first["questions"]
    ]
