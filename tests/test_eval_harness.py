"""The long-memory evaluation harness: metric arithmetic, dataset validation, a tiny real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from benchmarks.eval import harness, make_devset
from benchmarks.eval.dataset import DatasetError, load_dataset, parse_dataset
from benchmarks.eval.harness import aggregate, score_ranking

DEVSET = Path(__file__).resolve().parents[1] / "benchmarks" / "eval" / "devset.json"


def _turns(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text} for role, text in pairs]


def tiny_dataset() -> dict[str, Any]:
    """Five sessions, three questions: an exact-token lookup, a knowledge update, a skipped gold session."""
    sessions = {
        "router": (
            "2024/01/05 (Fri) 10:00",
            _turns(
                ("user", "My XJ-9000 router keeps dropping the connection after the firmware update."),
                ("assistant", "Roll the XJ-9000 back to the previous firmware and re-apply the port forwarding rules."),
                ("user", "The port forwarding for my game server is gone too."),
                ("assistant", "Add the rules again under Advanced > NAT on the XJ-9000 admin page."),
            ),
        ),
        "lisbon": (
            "2024/01/20 (Sat) 19:00",
            _turns(
                ("user", "I live in a small flat in Lisbon and the bedroom walls are always damp."),
                ("assistant", "A desiccant dehumidifier works well in cold, unheated rooms."),
                ("user", "I'll buy one for the Lisbon flat this weekend."),
            ),
        ),
        "hello": (
            "2024/02/03 (Sat) 08:00",
            _turns(("user", "Good morning!"), ("assistant", "Morning! How can I help?")),
        ),
        "porto": (
            "2024/03/10 (Sun) 09:30",
            _turns(
                ("user", "We have moved to Porto and got the keys to our new flat in Bonfim."),
                ("assistant", "Congratulations on the move to Porto!"),
                ("user", "The Porto flat is bright and dry, no dehumidifier needed."),
            ),
        ),
        "cake": (
            "2024/03/20 (Wed) 15:00",
            _turns(
                ("user", "I'm baking a chocolate birthday cake with raspberry filling for Mia."),
                ("assistant", "Use a ganache with a little salt so the raspberry comes through."),
                ("user", "Mia turns six, so I'll add sprinkles."),
            ),
        ),
    }
    return {
        "name": "tiny",
        "haystacks": [
            {
                "haystack_id": "t1",
                "haystack_session_ids": list(sessions),
                "haystack_dates": [date for date, _ in sessions.values()],
                "haystack_sessions": [turns for _, turns in sessions.values()],
            }
        ],
        "questions": [
            {
                "question_id": "q-router",
                "haystack_id": "t1",
                "question_type": "single-session-user",
                "question": "XJ-9000 router firmware and port forwarding",
                "answer": "roll back the firmware, re-add NAT rules",
                "answer_session_ids": ["router"],
            },
            {
                "question_id": "q-city",
                "haystack_id": "t1",
                "question_type": "knowledge-update",
                "question": "Where in Porto is our new flat?",
                "answer": "Bonfim, Porto",
                "answer_session_ids": ["porto"],
                "superseded_session_ids": ["lisbon"],
            },
            {
                "question_id": "q-greeting",
                "haystack_id": "t1",
                "question_type": "single-session-user",
                "question": "When did I say good morning?",
                "answer": "3 February",
                "answer_session_ids": ["hello"],
            },
        ],
    }


# -- metric arithmetic (pure) ------------------------------------------------------------
def test_score_ranking_single_gold() -> None:
    out = score_ranking(["a", "b", "c"], ["b"], [1, 2, 3])
    assert out.first_gold_rank == 2 and out.reciprocal_rank == 0.5
    assert out.recall_any == {1: False, 2: True, 3: True} and out.recall_all == out.recall_any
    assert out.update_correct is None
    missed = score_ranking(["a"], ["z"], [1, 5])
    assert missed.first_gold_rank is None and missed.reciprocal_rank == 0.0 and not any(missed.recall_any.values())


def test_score_ranking_any_vs_all() -> None:
    out = score_ranking(["a", "x", "b"], ["a", "b"], [1, 3])
    assert out.recall_any == {1: True, 3: True}
    assert out.recall_all == {1: False, 3: True}
    assert out.gold_ranks == {"a": 1, "b": 3} and out.reciprocal_rank == 1.0


def test_update_accuracy_needs_the_later_session_first() -> None:
    assert score_ranking(["new", "old"], ["new"], [5], ["old"]).update_correct is True
    assert score_ranking(["old", "new"], ["new"], [5], ["old"]).update_correct is False
    assert score_ranking(["new"], ["new"], [5], ["old"]).update_correct is True  # superseded not retrieved
    assert score_ranking(["old"], ["new"], [5], ["old"]).update_correct is False  # gold not retrieved


def test_aggregate_means() -> None:
    outcomes = [
        score_ranking(["g"], ["g"], [1, 5]),  # RR 1
        score_ranking(["x", "g"], ["g"], [1, 5]),  # RR 0.5
        score_ranking(["x"], ["g"], [1, 5]),  # RR 0
        score_ranking(["old", "new"], ["new"], [1, 5], ["old"]),  # RR 0.5, update wrong
    ]
    agg = aggregate(outcomes, [1, 5])
    assert agg["n"] == 4 and agg["mrr"] == 0.5
    assert agg["recall_any@1"] == 0.25 and agg["recall_any@5"] == 0.75
    assert agg["update"] == {
        "n": 1,
        "correct": 0,
        "accuracy": 0.0,
        "superseded_above_gold": 1,
        "gold_not_retrieved": 0,
    }


# -- validation --------------------------------------------------------------------------
def test_rejects_unknown_gold_session() -> None:
    bad = tiny_dataset()
    bad["questions"][0]["answer_session_ids"] = ["router", "nope"]
    with pytest.raises(DatasetError, match=r"answer_session_ids \['nope'\] are not sessions of haystack 't1'"):
        parse_dataset(bad, "bad")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["haystacks"][0]["haystack_dates"].pop(), "must have the same length"),
        (lambda d: d["haystacks"][0]["haystack_dates"].__setitem__(0, "last Tuesday"), "unrecognised date"),
        (lambda d: d["questions"][0].pop("question"), r"questions\[0\]\.question: Field required"),
        (lambda d: d["haystacks"][0]["haystack_sessions"][0][0].update(role="narrator"), "role"),
        (lambda d: d["questions"][1].update(superseded_session_ids=["porto"]), "both gold and superseded"),
        (lambda d: d["questions"][2].update(haystack_id="t9"), "'t9' is not a haystack"),
    ],
)
def test_rejects_malformed_datasets(mutate: Any, message: str) -> None:
    data = tiny_dataset()
    mutate(data)
    with pytest.raises(DatasetError, match=message) as info:
        parse_dataset(data, "bad")
    assert str(info.value).startswith("bad: invalid dataset")


def test_cli_reports_a_malformed_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.json"
    path.write_text(json.dumps({"haystacks": [], "questions": []}))
    assert harness.main(["--dataset", str(path)]) == 2
    err = capsys.readouterr().err
    assert "broken: invalid dataset" in err and "haystacks" in err
    path.write_text("{not json")
    assert harness.main(["--dataset", str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_longmemeval_and_locomo_shapes_load() -> None:
    session = [
        {"role": "user", "content": "I moved to Porto.", "has_answer": True},
        {"role": "assistant", "content": "Nice!"},
    ]
    instance = {
        "question_id": "q1",
        "question_type": "knowledge-update",
        "question": "Where do I live?",
        "answer": "Porto",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["s_a", "s_b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:00"],
        "haystack_sessions": [session, session],
        "answer_session_ids": ["s_b"],
    }
    lme = parse_dataset([instance, {**instance, "question_id": "q2_abs"}], "lme")
    assert len(lme.haystacks) == 1 and [q.question_type for q in lme.questions] == [
        "knowledge-update",
        "knowledge-update-abstention",
    ]
    locomo = [
        {
            "sample_id": "conv-1",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "I painted a sunrise."}],
                "session_2_date_time": "3:00 pm on 9 June, 2023",
                "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race."}],
            },
            "qa": [
                {"question": "When did Melanie run a race?", "answer": "June 2023", "evidence": ["D2:1"], "category": 2}
            ],
        }
    ]
    loco = parse_dataset(locomo, "loco")
    assert loco.questions[0].answer_session_ids == ["conv-1_session_2"]
    assert loco.haystacks[0].haystack_sessions[1][0].role == "assistant"


# -- the committed development set -------------------------------------------------------
def test_committed_devset_is_valid_and_complete() -> None:
    data = load_dataset(DEVSET)
    assert len(data.questions) >= 50 and len(data.haystacks) >= 12
    assert sum(len(h.haystack_session_ids) for h in data.haystacks) >= 60
    types = set(data.question_types())
    assert {"single-session-user", "multi-session", "knowledge-update", "temporal-reasoning"} <= types
    assert "single-session-paraphrase" in types
    for q in data.questions:
        hay = data.haystack(q.haystack_id)
        dates = dict(zip(hay.haystack_session_ids, hay.session_timestamps_ms(), strict=True))
        assert q.answer_session_ids and all(s in dates for s in q.answer_session_ids), q.question_id
        if q.question_type == "knowledge-update":
            assert q.superseded_session_ids, q.question_id
            assert max(dates[s] for s in q.superseded_session_ids) < min(dates[s] for s in q.answer_session_ids)
        if q.question_type == "multi-session":
            assert len(q.answer_session_ids) >= 2, q.question_id


def test_committed_devset_matches_its_generator() -> None:
    assert DEVSET.read_text(encoding="utf-8") == make_devset.render(make_devset.build())


# -- a real run (Redis, ONNX embedder, the session-end path) -----------------------------
def test_tiny_run_metrics_and_cleanup(redis_url: str) -> None:
    dataset = parse_dataset(tiny_dataset(), "tiny")
    prefix = "agtos-test-eval-tiny"
    results = harness.run(dataset, redis_url, ks=[1, 3], modes=["hybrid", "vector", "bm25"], key_prefix=prefix)
    assert not list(redis.Redis.from_url(redis_url).scan_iter(match=f"{prefix}:*"))  # all keys deleted

    ingestion = results["ingestion"]
    assert ingestion["saved"] == 4 and ingestion["skipped"] == 1
    assert ingestion["gold_sessions_skipped"] == ["t1/hello"]
    assert ingestion["questions_with_skipped_gold"] == ["q-greeting"]
    assert ingestion["episode_timestamp_mismatches"] == 0

    by_id = {q["question_id"]: q for q in results["questions"]}
    for mode in ("hybrid", "vector", "bm25"):
        assert by_id["q-router"]["modes"][mode]["first_gold_rank"] == 1, mode  # found first: RR 1.0
        assert by_id["q-greeting"]["modes"][mode]["first_gold_rank"] is None, mode  # never stored: RR 0
        city = by_id["q-city"]["modes"][mode]
        assert city["update_correct"] == (
            city["first_gold_rank"] is not None
            and (city["superseded_rank"] is None or city["first_gold_rank"] < city["superseded_rank"])
        )
        per_type = results["modes"][mode]["by_type"]["single-session-user"]
        assert per_type["n"] == 2 and per_type["mrr"] == 0.5 and per_type["recall_any@1"] == 0.5

    bm25 = results["modes"]["bm25"]["overall"]  # only the Porto session says "Porto": rank 1
    assert by_id["q-city"]["modes"]["bm25"]["first_gold_rank"] == 1
    assert bm25["mrr"] == round(2 / 3, 4) and bm25["recall_any@1"] == round(2 / 3, 4)
    assert bm25["update"]["n"] == 1 and bm25["update"]["accuracy"] == 1.0

    report = harness.render_markdown(results)
    assert "### mode: hybrid" in report and "| **all** | 3 |" in report and "update accuracy" in report
