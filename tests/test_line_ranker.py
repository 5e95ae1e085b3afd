"""The learned turn re-ranker (agtos.tasks.line_ranker): its features on a hand-written pool, the
logistic score, and the context's default order when no weights are shipped."""

from __future__ import annotations

import math

import pytest

from agtos.memory.context_builder import SPEAKER_BONUS, turn_relevance
from agtos.memory.recall import Found
from agtos.schemas.records import Role, StoredTurn
from agtos.storage.turns import TurnMatch
from agtos.tasks import line_ranker
from agtos.tasks.line_ranker import FEATURES, enabled, features, question_kind, rerank

DAY = 86_400_000


def _turn(position: int, name: str, content: str, day: int = 0, episode: str = "ep1") -> StoredTurn:
    return StoredTurn(
        user_id="u1",
        episode_id=episode,
        session_id=f"s-{episode}",
        position=position,
        role=Role.user if name == "Gina" else Role.assistant,
        name=name,
        content=content,
        timestamp=1_683_504_000_000 + day * DAY,
    )


POOL = [
    _turn(4, "Gina", "I opened my clothing store in Chicago last Friday!", day=10),
    _turn(5, "Jon", "Did you open it alone?"),
    _turn(1, "Jon", "Hey Gina!", day=0, episode="ep2"),
]


def _row(rows: list[list[float]], i: int) -> dict[str, float]:
    return dict(zip(FEATURES, rows[i], strict=True))


def test_features_of_a_hand_written_pool() -> None:
    rows = features(POOL, [0.8, 0.4, 0.2], "When did Gina open her store?", {"gina"}, {"ep1": 0, "ep2": 3})
    first, second, third = (_row(rows, i) for i in range(3))
    assert first["score_share"] == 1.0 and second["score_share"] == 0.5
    assert first["rank"] == 1.0 and second["rank"] == pytest.approx(1 / math.log2(3))
    assert first["episode_rank"] == 1.0 and third["episode_rank"] == 0.25
    assert first["episode_share"] == pytest.approx(2 / 3) and third["episode_share"] == pytest.approx(1 / 3)
    assert (first["asked_self"], first["asked_other"]) == (1.0, 0.0)
    assert (second["asked_self"], second["asked_other"]) == (0.0, 1.0)
    assert second["question"] == 1.0 and first["question"] == 0.0
    assert third["short"] == 1.0 and first["short"] == 0.0
    assert first["length"] == pytest.approx(math.log1p(9))
    assert second["neighbour_score"] == 0.8 and first["neighbour_score"] == 0.4 and third["neighbour_score"] == 0.0
    assert first["dated"] == 1.0 and first["when_dated"] == 1.0 and second["when_dated"] == 0.0
    assert first["names"] == 1.0  # "Chicago", "Friday": 5 x 2 / 9 words, capped at 1
    assert second["names"] == 0.0  # "Did" starts the sentence
    assert _row(features([_turn(7, "Jon", "So we met Anna at the park")], [0.5], "x", set(), {}), 0)["names"] == (
        pytest.approx(5 / 7)
    )
    assert third["opening"] == 1.0 and first["opening"] == 0.0
    assert (first["age"], second["age"]) == (1.0, 0.0)


def test_query_overlap_counts_the_question_terms_a_turn_holds() -> None:
    assert _row(features(POOL[:1], [0.5], "store in Chicago", set(), {}), 0)["overlap"] == 1.0
    assert _row(features(POOL[:1], [0.5], "the store of Anna", set(), {}), 0)["overlap"] == 0.5
    assert _row(features(POOL[1:2], [0.5], "store Chicago", set(), {}), 0)["overlap"] == 0.0


@pytest.mark.parametrize(
    ("question", "kinds"),
    [
        ("When did Gina open her store?", {"when"}),
        ("How many pets does Jon have?", {"count"}),
        ("Where did Jon go on holiday, and who with?", {"where_who"}),
        ("What does Gina like?", set()),
    ],
)
def test_question_kind(question: str, kinds: set[str]) -> None:
    assert question_kind(question) == kinds


def test_rerank_is_the_logistic_of_the_weighted_sum() -> None:
    row = [0.0] * len(FEATURES)
    row[FEATURES.index("overlap")] = 0.5
    row[FEATURES.index("question")] = 1.0
    assert rerank([row], {"overlap": 2.0}, -1.0) == [0.5]
    assert rerank([row], {"overlap": 2.0, "question": -1.0}, 0.0) == [pytest.approx(0.5)]
    assert rerank([row], {"question": math.log(3)}, 0.0) == [pytest.approx(0.75)]
    assert rerank([], {"overlap": 1.0}, 0.0) == []


def test_without_weights_the_context_keeps_the_search_order_and_the_speaker_rule() -> None:
    assert not enabled() and line_ranker.WEIGHTS == {}  # no weights shipped: LOCO-CV did not beat the default
    scores = [0.9, 0.6, 0.3]
    found = Found(
        turns=[TurnMatch(t, s, (f"{t.episode_id}.t{t.position}",)) for t, s in zip(POOL, scores, strict=True)]
    )
    assert turn_relevance(found, "What did Gina open?", {"gina"}) == [0.9, 0.6 / SPEAKER_BONUS, 0.3 / SPEAKER_BONUS]
    assert turn_relevance(found, "What opened?", set()) == [0.9, 0.6, 0.3]
