"""Durations read as dates (issue 14): "in two weeks" said in the past is how long a thing took, not a date
to come; and a present perfect whose "have" is said before an "and" still dates its span by its start.

Every expected date is worked out by hand from Monday 8 May 2023: two weeks later is Monday 22 May, three
days later Thursday 11 May, "a few days" (dated by three) 10-12 May; five years before is 2018.
"""

from __future__ import annotations

import pytest

from agtos.tasks.dates import resolve_dates
from tests.test_dates_h14 import MAY_8, said, shown


def dates(text: str, at: int = MAY_8) -> list[tuple[str, str, str]]:
    return [(d.text, d.date, d.period) for d in resolve_dates(text, at)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I finished it in a few days", []),  # an -ed past
        ("we did it in two weeks", []),  # an irregular past
        ("I read it in 3 days", []),  # a past written as its present, after a subject
        ("She wrote the whole thesis in a couple of months", []),
        ("It took me a while, but I learned it in two weeks", []),
        (  # each clause by its own verb: the job's start is a date, the paperwork's days are not
            "I got a job that starts in two weeks and did the paperwork in a few days",
            [("in two weeks", "2023-05-22", "day")],
        ),
    ],
)
def test_a_count_said_in_the_past_is_how_long_it_took_not_a_date(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    """Fails where "in <count> <units>" is dated whatever its tense (the bug: "we did it in two weeks
    [= 22 May 2023]", a date two weeks after the turn that nothing happened on)."""
    assert dates(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm moving in two weeks", [("in two weeks", "2023-05-22", "day")]),
        ("the exam is in a few days", [("in a few days", "2023-05-11", "day")]),
        ("I'll finish it in 3 days", [("in 3 days", "2023-05-11", "day")]),
        ("See you in two weeks!", [("in two weeks", "2023-05-22", "day")]),
        ("I got a job that starts in two weeks", [("in two weeks", "2023-05-22", "day")]),
        (
            "I had fun yesterday and we leave in two weeks",
            [("yesterday", "2023-05-07", "day"), ("in two weeks", "2023-05-22", "day")],
        ),
        ("I booked a flight, leaving in 3 days", [("in 3 days", "2023-05-11", "day")]),
    ],
)
def test_a_count_still_to_come_stays_a_date(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Fails where any past word in the sentence (not the clause's own verb) makes it a duration, or where
    a present or future clause loses its date ("I'm moving in two weeks" left undated)."""
    assert dates(text) == expected


def test_the_durations_are_shown_without_a_date_and_the_dates_to_come_with_one() -> None:
    """The context line: fails if a past count gets a "[= ...]" or a future one loses its range."""
    assert shown("We did it in two weeks") == "(8 May 2023) User: We did it in two weeks"
    assert shown("The exam is in a few days") == "(8 May 2023) User: The exam is in a few days [≈ 10–12 May 2023]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I have lived in Ohio and worked there for 5 years", [("for 5 years", "2018-05-08", "year")]),
        ("I've studied French, and also loved it for 10 years", [("for 10 years", "2013-05-08", "year")]),
        ("She has owned a shop and run it for 3 months", [("for 3 months", "2023-02-08", "month")]),
        ("I have worked there for 5 years", [("for 5 years", "2018-05-08", "year")]),  # unchanged
    ],
)
def test_a_present_perfect_shares_its_have_across_an_and(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Fails where only the clause after the "and" is searched for the perfect (the bug: the span left
    undated), 5 years before 8 May 2023 being 2018 and 3 months before it 8 February 2023."""
    assert dates(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I have lived in Ohio and I worked there for 5 years",  # a new subject: a past simple, over
        "I worked in Ohio and lived there for 5 years",  # no perfect before the "and"
        "I have a dog and walked him for 2 days",  # "have" a thing, no perfect
        "I have lived in Ohio. Then worked there for 5 years",  # another sentence
    ],
)
def test_a_span_after_an_and_without_a_perfect_is_left_alone(text: str) -> None:
    """Fails where any earlier "have" in the text, or one past a new subject or sentence, makes the span
    last up to now."""
    assert dates(text) == []


def test_a_shared_perfect_is_shown_by_its_start() -> None:
    assert shown("I have lived in Ohio and worked there for 5 years", said(2023, 12, 29)) == (
        "(29 December 2023) User: I have lived in Ohio and worked there for 5 years [= since 2018]"
    )


# -- found by the audit of realtalk-dev and convset (issue 14) -------------------------------------------
SUNDAY_MAY_14 = said(2023, 5, 14)


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("How was your Monday?", MAY_8, [("Monday", "2023-05-08", "day")]),  # said on a Monday: that day
        ("Hi Gina, happy Monday!", MAY_8, [("Monday", "2023-05-08", "day")]),
        ("my Monday was long", MAY_8, [("Monday", "2023-05-08", "day")]),
        ("How was your Friday?", MAY_8, [("Friday", "2023-05-05", "day")]),  # another day: by the tense, as before
        ("Hi Gina, happy Friday!", MAY_8, []),  # another day, no tense: as before
        ("Your Monday playlist is great", MAY_8, []),  # a noun after it: no one day
    ],
)
def test_a_weekday_of_ones_own_said_on_that_weekday_is_that_day(
    text: str, at: int, expected: list[tuple[str, str, str]]
) -> None:
    """Fails where "how was your Monday?" said on Monday 8 May is read as the Monday before (1 May, the bug
    the audit found in every "how was your <weekday>" opener), or where the rule reaches other weekdays or
    a weekday a noun follows."""
    assert dates(text, at) == expected


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("Any plans for the weekend?", MAY_8, [("the weekend", "2023-05-13", "weekend")]),
        ("Any plans for the weekend?", SUNDAY_MAY_14, [("the weekend", "2023-05-20", "weekend")]),
        ("We went to Napa for the weekend", MAY_8, [("the weekend", "2023-05-06", "weekend")]),
        ("I usually go home for the weekend", MAY_8, []),  # a habit: no tense, no one weekend
    ],
)
def test_for_the_weekend_is_read_by_its_tense(text: str, at: int, expected: list[tuple[str, str, str]]) -> None:
    """Fails where "for the weekend" is not a candidate (left undated) or is dated without a tense; the
    coming weekend said on Monday 8 May starts Saturday 13 May, said on Sunday 14 May the next one (20 May);
    the latest one begun by Monday 8 May started Saturday 6 May."""
    assert dates(text, at) == expected


def test_nights_ago_are_as_many_days_ago() -> None:
    """Fails where "nights ago" is no candidate or is not shown as a rough range: three nights before 8 May
    is 5 May (a few: 4-6 May), two nights before it 6 May."""
    assert dates("This is what I made a few nights ago.") == [("a few nights ago", "2023-05-05", "day")]
    assert dates("two nights ago we danced") == [("two nights ago", "2023-05-06", "day")]
    assert shown("This is what I made a few nights ago.") == (
        "(8 May 2023) User: This is what I made a few nights ago [≈ 4–6 May 2023]."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I’m flying to Rome on Tuesday", [("Tuesday", "2023-05-09", "day")]),
        ("I’ll call you on Friday", [("Friday", "2023-05-12", "day")]),
        ("I’m moving in two weeks", [("in two weeks", "2023-05-22", "day")]),
        ("I'm flying to Rome on Tuesday", [("Tuesday", "2023-05-09", "day")]),  # the straight one, as before
    ],
)
def test_a_curly_apostrophe_says_the_tense_as_a_straight_one(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Phones type "I’m": fails where the tense cues only read "I'm" (the weekday left undated), Tuesday 9
    May and Friday 12 May being the next ones after Monday 8 May."""
    assert dates(text) == expected


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("Have a lovely Sunday!", SUNDAY_MAY_14, [("Sunday", "2023-05-14", "day")]),  # a wish, on the day
        ("Enjoy your Sunday, and take care", SUNDAY_MAY_14, [("Sunday", "2023-05-14", "day")]),
        ("Have a lovely Sunday!", MAY_8, []),  # said on another day: no tense, as before
    ],
)
def test_a_wish_for_the_day_said_on_it_is_that_day(text: str, at: int, expected: list[tuple[str, str, str]]) -> None:
    """Fails where "have a lovely Sunday" said on Sunday 14 May is not that day (left undated, as the audit
    found in realtalk-dev), or where a wish for another weekday is dated without a tense."""
    assert dates(text, at) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He told me the results come in two weeks", [("in two weeks", "2023-05-22", "day")]),  # reported
        ("I hoped it would be ready in two weeks", [("in two weeks", "2023-05-22", "day")]),  # a past's future
        ("She said she'd call in a few days", [("in a few days", "2023-05-11", "day")]),
        ("I'd done it in two weeks", []),  # "had done": how long it took
        ("I told her I finished it in 3 days", []),  # what is reported is in the past
    ],
)
def test_reported_and_would_keep_a_count_to_come(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Fails where a reporting verb ("told") or a past before "would" makes what is to come a duration
    (undated), or where "I'd done" is read as "I would"; two weeks after Monday 8 May is 22 May, three days
    11 May."""
    assert dates(text) == expected
