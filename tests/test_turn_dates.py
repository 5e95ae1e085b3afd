"""Relative dates of a turn resolved against the turn's own time, the dated speaker line, and the
index units of turns (long turns split into windows the embedder sees whole).

Expected dates are calendar facts written out by hand (8 May 2023 was a Monday).
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import pytest

from agtos.schemas import Episode, IngestItem, Turn
from agtos.tasks.dates import format_turn, resolve_dates
from agtos.tasks.tokens import count_tokens
from agtos.tasks.verbatim_turns import WINDOW_TOKENS, batch_turns, chunk_spans, stored_turns, turn_units

MAY_8 = int(datetime(2023, 5, 8, 14, 30, tzinfo=UTC).timestamp() * 1000)  # a Monday afternoon (UTC)


def dates(text: str, at: int = MAY_8) -> list[tuple[str, str, str]]:
    return [(d.text, d.date, d.period) for d in resolve_dates(text, at)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to the support group yesterday", [("yesterday", "2023-05-07", "day")]),
        ("We met last Friday.", [("last Friday", "2023-05-05", "day")]),
        ("I start the new job next month!", [("next month", "2023-06-08", "month")]),
        ("Two weeks ago I adopted a dog", [("Two weeks ago", "2023-04-24", "day")]),
        ("We moved to Lyon in 2019.", [("2019", "2019-05-08", "year")]),
        (
            "3 days ago it rained, tomorrow it snows",
            [("3 days ago", "2023-05-05", "day"), ("tomorrow", "2023-05-09", "day")],
        ),
        ("the day before yesterday was my birthday", [("the day before yesterday", "2023-05-06", "day")]),
        ("See you next Friday", [("next Friday", "2023-05-12", "day")]),
    ],
)
def test_relative_expressions_resolve_against_the_turn_time(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert dates(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "We may go to Paris, I am 25 and have 3 cats",  # "we" is not Wednesday, "may" not May, "am 25" no date
        "It has been a second home since forever",
        "I was born on 20 May 2001",  # already absolute: nothing to resolve
    ],
)
def test_words_that_only_look_like_dates_are_left_alone(text: str) -> None:
    assert dates(text) == []


def test_the_turn_date_is_its_own_not_today() -> None:
    just_after_midnight = int(datetime(2019, 12, 31, 23, 59, tzinfo=UTC).timestamp() * 1000) + 120_000
    assert dates("what a party yesterday", just_after_midnight) == [("yesterday", "2019-12-31", "day")]


def test_a_dated_speaker_line_shows_the_resolved_date_after_the_expression() -> None:
    turn = Turn(role="user", name="Caroline", content="I went to the support group yesterday", timestamp=MAY_8)
    (stored,) = stored_turns("u", "ep-1", "s-1", [turn])
    assert format_turn(stored) == "(8 May 2023) Caroline: I went to the support group yesterday [= 7 May 2023]"
    several = stored.model_copy(update={"content": "Paris next month, Rome in 2019, Oslo two weeks ago"})
    several = several.model_copy(update={"dates": resolve_dates(several.content, MAY_8)})
    assert format_turn(several) == (
        "(8 May 2023) Caroline: Paris next month [= June 2023], Rome in 2019, Oslo two weeks ago [= 24 April 2023]"
    )


def test_stored_turns_keep_order_names_and_times_and_leave_summaries_out() -> None:
    turns = [
        Turn(role="user", content="Gina: I lost my job at Door Dash", timestamp=MAY_8),
        Turn(role="assistant", content="(summary of earlier turns)", is_summary=True, timestamp=MAY_8 + 1),
        Turn(role="assistant", content="Jon: Sorry to hear that, Gina", timestamp=MAY_8 + 2),
        Turn(role="user", content="Gina: Thanks, Jon", timestamp=MAY_8 + 3),
        Turn(role="assistant", name="Jonathan", content="Jon: anytime", timestamp=MAY_8 + 4),
    ]
    stored = stored_turns("u", "ep-1", "s-1", turns)
    assert [(t.position, t.role, t.name, t.timestamp) for t in stored] == [
        (0, "user", "Gina", MAY_8),
        (1, "assistant", "Jon", MAY_8 + 2),
        (2, "user", "Gina", MAY_8 + 3),
        (3, "assistant", "Jonathan", MAY_8 + 4),
    ]
    assert stored[0].content == "Gina: I lost my job at Door Dash"  # verbatim, prefix and all


def test_batch_turns_pair_each_episode_with_its_items_turns() -> None:
    said = [Turn(role="user", content="I like tea", timestamp=MAY_8)]
    other = [Turn(role="user", content="I like coffee", timestamp=MAY_8)]
    brought = Episode(id="ep-b", user_id="u", session_id="s-1", summary="tea")
    made = Episode(id="ep-m", user_id="u", session_id="s-2", summary="coffee")
    items = [
        IngestItem(user_id="u", session_id="s-1", turns=said, episode=brought),
        IngestItem(user_id="u", session_id="s-2", turns=other),
        IngestItem(user_id="u", session_id="s-3", turns=other),  # not saved: no episode among the stored
    ]
    stored = batch_turns(items, [brought, made])
    assert [(t.episode_id, t.session_id, t.content) for t in stored] == [
        ("ep-b", "s-1", "I like tea"),
        ("ep-m", "s-2", "I like coffee"),
    ]


def test_a_long_turn_is_split_into_overlapping_windows_that_fit_the_embedder() -> None:
    words = [f"w{i}" for i in range(900)]  # "w12" is two word pieces: ~1,800 tokens
    text = " ".join(words)
    spans = chunk_spans(text)
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(count_tokens(text[a:b]) <= WINDOW_TOKENS for a, b in spans)
    assert all(b2 > a1 and a2 < b1 for (a1, b1), (a2, b2) in pairwise(spans))  # consecutive windows overlap
    (stored,) = stored_turns("u", "ep-1", "s-1", [Turn(role="user", name="Ann", content=text, timestamp=MAY_8)])
    units = turn_units([stored])
    assert [u.chunk for u in units] == list(range(len(spans)))
    assert all(u.text.startswith("(8 May 2023) Ann: ") and count_tokens(u.text) <= WINDOW_TOKENS for u in units)
    assert units[-1].text.endswith("w899")
    assert [u.text for u in turn_units([stored.model_copy(update={"content": "short"})])] == ["(8 May 2023) Ann: short"]
