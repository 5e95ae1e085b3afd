"""Relative dates real chats use that the resolver missed (issue 14): rough counts ("a few days ago",
"several years back", "in a few weeks", "the other day"), shown as the range they may mean behind "≈";
"the end of the month" by its tense; "it's been 8 months since"; a part of the day kept with its day
("yesterday morning").

Every expected date is a calendar fact worked out by hand: 8 May 2023 was a Monday; "a few" is read as
two to four (dated by three), "several" as three to seven (dated by five), "the other day" as one to seven
days before the turn's day (dated by four).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from agtos.schemas import Role, Turn
from agtos.tasks.dates import format_turn, resolve_dates
from agtos.tasks.verbatim_turns import stored_turns
from tests.test_probe_fidelity import context, end
from tests.test_turn_dates import said_on_may_8


def said(year: int, month: int, day: int) -> int:
    """A turn's timestamp (ms) on that day, 14:30 UTC."""
    return int(datetime(year, month, day, 14, 30, tzinfo=UTC).timestamp() * 1000)


MAY_8 = said(2023, 5, 8)


def dates(text: str, at: int = MAY_8) -> list[tuple[str, str, str]]:
    return [(d.text, d.date, d.period) for d in resolve_dates(text, at)]


def shown(content: str, at: int = MAY_8) -> str:
    (stored,) = stored_turns("u", "ep-1", "s-1", [Turn(role=Role.user, content=content, timestamp=at)])
    return format_turn(stored)


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("I saw her a few days ago", MAY_8, [("a few days ago", "2023-05-05", "day")]),
        ("We talked the other day", MAY_8, [("the other day", "2023-05-04", "day")]),
        ("We danced the other night", MAY_8, [("the other night", "2023-05-04", "day")]),
        ("I moved a few weeks ago", MAY_8, [("a few weeks ago", "2023-04-17", "day")]),
        ("I saw it a few months ago", MAY_8, [("a few months ago", "2023-02-08", "month")]),
        ("A few years ago I lived there", MAY_8, [("A few years ago", "2020-05-08", "year")]),
        ("It happened several days ago", MAY_8, [("several days ago", "2023-05-03", "day")]),
        ("I'll know in a few days", MAY_8, [("in a few days", "2023-05-11", "day")]),
        ("They arrive in a few weeks", MAY_8, [("in a few weeks", "2023-05-29", "day")]),
        ("Here is me a few years back", said(2023, 12, 30), [("a few years back", "2020-12-30", "year")]),
        ("two days back, I fell", MAY_8, [("two days back", "2023-05-06", "day")]),
        ("yesterday morning I ran", MAY_8, [("yesterday morning", "2023-05-07", "day")]),
        ("I'll call tomorrow night", MAY_8, [("tomorrow night", "2023-05-09", "day")]),
        ("We met last Friday night", MAY_8, [("last Friday night", "2023-05-05", "day")]),
        ("It's due at the end of the month", MAY_8, [("the end of the month", "2023-05-08", "month")]),
        ("We moved at the end of the month", MAY_8, [("the end of the month", "2023-04-08", "month")]),
        ("I'll start at the beginning of the year", MAY_8, [("the beginning of the year", "2024-05-08", "year")]),
        ("I want to squat more by the end of the year", MAY_8, [("the end of the year", "2023-05-08", "year")]),
        (
            "It's been around 8 months since I last saw him.",
            said(2024, 1, 13),
            [("been around 8 months", "2023-05-13", "month")],
        ),
        ("It has been two years since we met", MAY_8, [("been two years", "2021-05-08", "year")]),
        (
            "I have been going to the spa for the past few years.",
            said(2024, 1, 19),
            [("for the past few years", "2021-01-19", "year")],
        ),
        # unchanged: a couple is two, the month before is April
        ("I met him a couple of days ago", MAY_8, [("a couple of days ago", "2023-05-06", "day")]),
        ("I started a month ago", MAY_8, [("a month ago", "2023-04-08", "month")]),
    ],
)
def test_rough_and_everyday_expressions_resolve(text: str, at: int, expected: list[tuple[str, str, str]]) -> None:
    assert dates(text, at) == expected


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [  # the range a rough date may mean, across months and years
        ("I saw her a few days ago", MAY_8, "(8 May 2023) User: I saw her a few days ago [≈ 4–6 May 2023]"),
        ("a few days ago", said(2023, 5, 2), "(2 May 2023) User: a few days ago [≈ 28–30 April 2023]"),
        ("a few days ago", said(2023, 1, 2), "(2 January 2023) User: a few days ago [≈ 29–31 December 2022]"),
        ("few days ago", said(2024, 1, 4), "(4 January 2024) User: few days ago [≈ 31 December 2023–2 January 2024]"),
        ("We talked the other day", MAY_8, "(8 May 2023) User: We talked the other day [≈ 1–7 May 2023]"),
        ("I moved a few weeks ago", MAY_8, "(8 May 2023) User: I moved a few weeks ago [≈ 10–24 April 2023]"),
        (
            "visiting friends in a few weeks",
            said(2024, 1, 13),
            "(13 January 2024) User: visiting friends in a few weeks [≈ 27 January–10 February 2024]",
        ),
        ("a few months ago", MAY_8, "(8 May 2023) User: a few months ago [≈ January–March 2023]"),
        ("a few months ago", said(2023, 3, 8), "(8 March 2023) User: a few months ago [≈ November 2022–January 2023]"),
        ("It happened several days ago", MAY_8, "(8 May 2023) User: It happened several days ago [≈ 1–5 May 2023]"),
        ("several years ago", said(2024, 1, 13), "(13 January 2024) User: several years ago [≈ 2017–2021]"),
        ("A few years ago I lived there", MAY_8, "(8 May 2023) User: A few years ago [≈ 2019–2021] I lived there"),
        (
            "I have been going there for the past few years.",
            said(2024, 1, 19),
            "(19 January 2024) User: I have been going there for the past few years [≈ since 2021].",
        ),
        # said exactly: "=" as before, the part of the day before the date
        ("yesterday morning I ran", MAY_8, "(8 May 2023) User: yesterday morning [= 7 May 2023] I ran"),
        ("It's due at the end of the month", MAY_8, "(8 May 2023) User: It's due at the end of the month [= May 2023]"),
        (
            "It's been around 8 months since I last saw him.",
            said(2024, 1, 13),
            "(13 January 2024) User: It's been around 8 months [= May 2023] since I last saw him.",
        ),
    ],
)
def test_a_rough_date_is_shown_as_the_range_it_may_mean(text: str, at: int, expected: str) -> None:
    assert shown(text, at) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I spent two weeks back home",  # where one was, not when
        "a few days back in Ohio were fun",
        "I wash it every other day",
        "see you on the other day of the fair",
        "Jon!! It's been a few days",  # a greeting: no "since", no event dated
        "I'll be away for a few weeks",  # no span that ends now
        "It was a while ago",
        "I did it recently",
    ],
)
def test_what_names_no_date_is_left_alone(text: str) -> None:
    assert dates(text) == []


def test_rough_dates_are_shown_in_the_context(client: TestClient) -> None:
    """Through HTTP, turns said on Monday 8 May 2023: the context shows the range, marked ≈."""
    turns = [
        ("Gina", "A few days ago I adopted a greyhound named Biscuit."),
        ("Jon", "I saw a heron at the lake the other day, huge wings."),
    ]
    shown_context = said_on_may_8(client, "dated-rough", turns, "greyhound Biscuit heron lake")
    assert "- Gina: A few days ago [≈ 4–6 May 2023] I adopted a greyhound named Biscuit." in shown_context
    assert "- Jon: I saw a heron at the lake the other day [≈ 1–7 May 2023], huge wings." in shown_context


def test_a_turn_said_abroad_dates_its_rough_range_by_its_own_day(client: TestClient) -> None:
    """Said at 01:00 on 9 May in Tokyo (8 May in UTC): "a few days ago" is 5-7 May, counted from 9 May."""
    sent = [
        {"role": "user", "name": "Aiko", "content": text, "timestamp": f"2023-05-09T01:0{i}:00+09:00"}
        for i, text in enumerate(["A few days ago I bought a kayak.", "It is red and fits two people."])
    ]
    end(client, "dated-rough-tokyo", "s1", sent)
    said_there = context(client, "dated-rough-tokyo", "kayak")
    assert "Aiko: A few days ago [≈ 5–7 May 2023] I bought a kayak." in said_there, said_there
