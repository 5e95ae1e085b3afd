"""Relative dates of a turn resolved against the turn's own time, the dated speaker line, and the
index units of turns (long turns split into windows the embedder sees whole).

Expected dates are calendar facts written out by hand (8 May 2023 was a Monday).
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import pytest
from fastapi.testclient import TestClient

from agtos.memory.context_builder import evidence_items
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Episode, IngestItem, Role, Turn
from agtos.tasks.dates import format_turn, resolve_dates
from agtos.tasks.tokens import count_tokens
from agtos.tasks.verbatim_turns import WINDOW_TOKENS, batch_turns, chunk_spans, stored_turns, turn_units
from tests.helpers import user
from tests.test_probe_fidelity import context, end

MAY_8 = int(datetime(2023, 5, 8, 14, 30, tzinfo=UTC).timestamp() * 1000)  # a Monday afternoon (UTC)


def dates(text: str, at: int = MAY_8) -> list[tuple[str, str, str]]:
    return [(d.text, d.date, d.period) for d in resolve_dates(text, at)]


def said_on_may_8(client: TestClient, user_id: str, turns: list[tuple[str, str]], query: str) -> str:
    """``turns`` (speaker, text) sent on Monday 8 May 2023 and the session ended: the context for ``query``."""
    sent = [
        {"role": "user", "name": name, "content": text, "timestamp": f"2023-05-08T10:0{i}:00Z"}
        for i, (name, text) in enumerate(turns)
    ]
    end(client, user_id, "s1", sent)
    return context(client, user_id, query)


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # said on Monday 8 May 2023: Tuesday 2 May and 9 May, Friday 5 May and 12 May, Sunday 14 May, Monday 1 May/15 May
        ("On Tuesday I went to the park", [("Tuesday", "2023-05-02", "day")]),
        ("I'm flying to Rome on Tuesday", [("Tuesday", "2023-05-09", "day")]),
        ("We met on Monday.", [("Monday", "2023-05-01", "day")]),  # said on a Monday: the one before
        ("I will see her on Monday", [("Monday", "2023-05-15", "day")]),
        ("Friday night we watched a movie", [("Friday night", "2023-05-05", "day")]),
        (
            "I got a dog on Friday and will walk him on Sunday",  # each clause its own tense
            [("Friday", "2023-05-05", "day"), ("Sunday", "2023-05-14", "day")],
        ),
        ("this morning I ran 5k", [("this morning", "2023-05-08", "day")]),
        ("Tonight we cook", [("Tonight", "2023-05-08", "day")]),
        ("We went camping last weekend", [("last weekend", "2023-05-06", "weekend")]),
        ("What are you doing this weekend?", [("this weekend", "2023-05-13", "weekend")]),
        ("Next weekend I'll hike", [("Next weekend", "2023-05-20", "weekend")]),
        ("I visited Paris in March", [("March", "2023-03-08", "month")]),
        ("I went to Lisbon in June", [("June", "2022-06-08", "month")]),
        ("I'll go to Lisbon in June", [("June", "2023-06-08", "month")]),
        ("I'll go to Oslo in May", [("May", "2023-05-08", "month")]),  # said in May: this May
        ("Last May I quit my job", [("Last May", "2022-05-08", "month")]),
        ("Next May we marry", [("Next May", "2024-05-08", "month")]),
        ("This March was cold", [("This March", "2023-03-08", "month")]),
        ("I never tried it until January of 2018", [("2018", "2018-05-08", "year")]),  # no January of 2023
        ("We met last summer", [("last summer", "2022-06-01", "season")]),
        ("My internship is this summer", [("this summer", "2023-06-01", "season")]),
        ("I studied in Rome last spring", [("last spring", "2022-03-01", "season")]),  # May: this one is under way
        # a thing one has on a weekday, said in the present: the coming one
        ("I have a dentist appointment on Tuesday", [("Tuesday", "2023-05-09", "day")]),
        ("We're meeting Friday", [("Friday", "2023-05-12", "day")]),
        ("The party is on Saturday", [("Saturday", "2023-05-13", "day")]),
        ("I've got an exam on Friday", [("Friday", "2023-05-12", "day")]),
        ("Our exams are on Friday", [("Friday", "2023-05-12", "day")]),  # several: the same rule
        ("I have two classes on Wednesday", [("Wednesday", "2023-05-10", "day")]),
        ("Both parties are on Saturday", [("Saturday", "2023-05-13", "day")]),
        ("We had exams on Friday", [("Friday", "2023-05-05", "day")]),
        ("I had a dentist appointment on Tuesday", [("Tuesday", "2023-05-02", "day")]),
        ("I have had an interview on Friday", [("Friday", "2023-05-05", "day")]),
    ],
)
def test_weekdays_weekends_and_months_named_alone_resolve_by_tense(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    assert dates(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Tuesday is my day off",  # no tense: which Tuesday is not said
        "Are you free on Friday?",
        "Mondays are hard",
        "I was born in March.",  # a birthday's month, not a date
        "I'm so excited for Saturday",  # an adjective, not a past tense
        "We married in June 2019",  # absolute
        "I had brunch, a Sunday morning tradition of ours",  # no one Sunday
        "We went hiking every Saturday",
        # booked or scheduled (past) for a time that may be still to come: found by test_hot_route_threads,
        # whose "I booked a trip … for the second week of June", said in December, read [= June] of that year
        "I booked a trip to Lisbon for the second week of June with my sister Ana",
        "I scheduled the dentist for Tuesday",
        "I have yoga on Tuesday",  # no one thing on one Tuesday
        "I have a photo from Tuesday",
    ],
)
def test_a_weekday_or_month_whose_tense_is_not_said_is_left_alone(text: str) -> None:
    assert dates(text) == []


def test_seasons_are_resolved_where_their_year_is_not_in_doubt() -> None:
    october = int(datetime(2023, 10, 2, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("last summer and next fall and this autumn", october) == [
        ("last summer", "2023-06-01", "season"),  # over: this year's
        ("next fall", "2024-09-01", "season"),
        ("this autumn", "2023-09-01", "season"),
    ]
    assert dates("next summer", MAY_8) == []  # said in May: this coming one or the one after
    december = int(datetime(2023, 12, 20, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("this spring", december) == [("this spring", "2024-03-01", "season")]  # the nearer one
    january = int(datetime(2024, 1, 14, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("My friend has a job there this summer", january) == []  # 5 months from either
    assert dates("My friend took this photo this summer", january) == [("this summer", "2023-06-01", "season")]
    assert dates("I'll visit Greece this summer", january) == [("this summer", "2024-06-01", "season")]
    (stored,) = stored_turns("u", "ep-1", "s-1", [Turn(role=Role.user, content="Paris this fall!", timestamp=october)])
    assert format_turn(stored) == "(2 October 2023) User: Paris this fall [= fall 2023]!"
    leap_day = int(datetime(2024, 2, 29, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("Last February I moved", leap_day) == [("Last February", "2023-02-28", "month")]


def shown(content: str, timestamp: int) -> str:
    """A user's turn said at ``timestamp`` (ms) as the context shows it, its dates resolved."""
    (stored,) = stored_turns("u", "ep-1", "s-1", [Turn(role=Role.user, content=content, timestamp=timestamp)])
    return format_turn(stored)


def test_a_span_that_lasts_up_to_now_is_dated_by_its_start() -> None:
    """ "For ten years", said in a present perfect, began ten years before the turn: "since 2013"; a span of
    something to come, or said in the past, has no start that the turn's day tells."""
    december = int(datetime(2023, 12, 29, 22, tzinfo=UTC).timestamp() * 1000)
    assert dates("I've been skiing for about 10 years now.", december) == [("for about 10 years", "2013-12-29", "year")]
    assert dates("She has lived in Rome for 3 months", december) == [("for 3 months", "2023-09-29", "month")]
    assert dates("We’ve known each other for a year", december) == [("for a year", "2022-12-29", "year")]
    for text in ("I'll be away for two weeks", "We stayed in Lisbon for a week", "I have a flat for 3 months"):
        assert dates(text, december) == [], text
    assert shown("I've been skiing for 10 years", december) == (
        "(29 December 2023) User: I've been skiing for 10 years [= since 2013]"
    )


def test_the_season_is_read_by_the_tense_it_is_said_in() -> None:
    """ "Over the summer" is this summer, or, out of season, the latest one (past) or the next (future)."""
    january = int(datetime(2024, 1, 1, 18, tzinfo=UTC).timestamp() * 1000)
    assert dates("I was in Hawaii over the summer", january) == [("the summer", "2023-06-01", "season")]
    assert dates("I'll visit Greece during the summer", january) == [("the summer", "2024-06-01", "season")]
    assert dates("We went skiing in the winter", MAY_8) == [("the winter", "2022-12-01", "season")]
    for text in ("In the summer I go to the beach house", "I love the summer", "the day before the summer"):
        assert dates(text, january) == [], text
        assert dates(text, MAY_8) == [], text  # no tense: neither the summer to come nor the last
    assert shown("I was in Hawaii over the summer", january) == (
        "(1 January 2024) User: I was in Hawaii over the summer [= summer 2023]"
    )


def test_a_winter_is_named_by_its_december() -> None:
    """Winter spans two calendar years (December to February): the one of 2022-23 starts 1 December 2022."""
    may = MAY_8
    assert dates("We went skiing last winter", may) == [("last winter", "2022-12-01", "season")]
    assert dates("I'll ski in the Alps this winter", may) == [("this winter", "2023-12-01", "season")]
    assert dates("This winter was so cold", may) == [("This winter", "2022-12-01", "season")]
    assert dates("next winter", may) == []  # said in May: the coming one or the one after
    january = int(datetime(2024, 1, 14, 12, tzinfo=UTC).timestamp() * 1000)  # inside the winter of 2023-24
    assert dates("last winter, this winter and next winter", january) == [
        ("last winter", "2022-12-01", "season"),
        ("this winter", "2023-12-01", "season"),
        ("next winter", "2024-12-01", "season"),
    ]
    (stored,) = stored_turns("u", "ep-1", "s-1", [Turn(role=Role.user, content="We met last winter", timestamp=may)])
    assert format_turn(stored) == "(8 May 2023) User: We met last winter [= winter 2022–23]"


def test_weekends_are_the_calendar_weeks_saturdays() -> None:
    sunday_14 = int(datetime(2023, 5, 14, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("last weekend and this weekend", sunday_14) == [
        ("last weekend", "2023-05-06", "weekend"),
        ("this weekend", "2023-05-13", "weekend"),
    ]
    monday_1 = int(datetime(2023, 5, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("We hiked last weekend", monday_1) == [("last weekend", "2023-04-29", "weekend")]
    turn = Turn(role=Role.user, name="Jon", content="We went camping last weekend", timestamp=MAY_8)
    (stored,) = stored_turns("u", "ep-1", "s-1", [turn])
    assert format_turn(stored) == "(8 May 2023) Jon: We went camping last weekend [= weekend of 6 May 2023]"


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


def test_weekdays_weekends_and_months_are_shown_resolved_in_the_context(client: TestClient) -> None:
    """Turns of Monday 8 May 2023 sent through HTTP: the context shows each expression's absolute date."""
    turns = [
        ("Gina", "On Tuesday I went to a pottery class with Ana."),
        ("Jon", "We went camping at Lake Tahoe last weekend."),
        ("Gina", "I'll fly to Oaxaca in June for the food festival."),
        ("Jon", "I have a dentist appointment on Tuesday."),
        ("Gina", "We went skiing in Utah last winter."),
    ]
    said = said_on_may_8(
        client, "dated-alone", turns, "pottery class camping Lake Tahoe Oaxaca food festival dentist skiing Utah"
    )
    assert "8 May 2023:\n" in said, said
    for line in (
        "- Gina: On Tuesday [= 2 May 2023] I went to a pottery class with Ana.",
        "- Jon: We went camping at Lake Tahoe last weekend [= weekend of 6 May 2023].",
        "- Gina: I'll fly to Oaxaca in June [= June 2023] for the food festival.",
        "- Jon: I have a dentist appointment on Tuesday [= 9 May 2023].",
        "- Gina: We went skiing in Utah last winter [= winter 2022–23].",
    ):
        assert line in said, said


def test_a_fact_is_dated_on_the_local_day_its_turn_was_said(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """'I adopted a corgi' said at 2023-05-08T20:00-07:00 (Monday evening in Oregon, Tuesday 9 May in UTC):
    its turn line was under 8 May but its fact line said 9 May. Said again on 1 June (UTC), the fact
    keeps the day it was first said; a valid_from edited in ms is read on its UTC day."""
    corgi = "I adopted a corgi named Biscuit."
    end(
        client,
        "fact-tz",
        "oregon",
        [
            {"role": "user", "content": corgi, "timestamp": "2023-05-08T20:00:00-07:00"},
            {"role": "assistant", "content": "Congratulations!", "timestamp": "2023-05-08T20:01:00-07:00"},
        ],
    )

    def fact_lines() -> list[str]:
        items, _ = evidence_items(coordinator.services, "fact-tz", "corgi named Biscuit", 1_000, 10)
        return [item.bullet for item in items if item.tier == "semantic"]

    assert fact_lines() == ["- (8 May 2023) User adopted a corgi named Biscuit"]
    end(
        client,
        "fact-tz",
        "june",
        [
            {"role": "user", "content": corgi, "timestamp": "2023-06-01T10:00:00Z"},
            {"role": "assistant", "content": "Cute!", "timestamp": "2023-06-01T10:01:00Z"},
        ],
    )
    assert fact_lines() == ["- (8 May 2023) User adopted a corgi named Biscuit"]
    listed = client.get("/api/memory/memories", headers=user("fact-tz")).json()["memories"]
    (corgi_id,) = [m["id"] for m in listed if "corgi" in m["text"]]
    moved = {"valid_from": 1_683_590_400_000}  # 2023-05-09T00:00Z, sent in ms: read on its UTC day
    edited = client.put(f"/api/memory/memories/{corgi_id}", json=moved, headers=user("fact-tz"))
    assert edited.status_code == 200, edited.text
    assert fact_lines() == ["- (9 May 2023) User adopted a corgi named Biscuit"]


def test_conclusion_and_session_lines_are_dated_on_the_local_day_of_the_session(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """A session said on the evening of 2 March 2021 in California (3 March in UTC): its conclusion's and
    its summary's lines said 3 March."""
    end(
        client,
        "session-tz",
        "diet",
        [
            {"role": "user", "content": "I'm vegetarian since college.", "timestamp": "2021-03-02T20:00:00-08:00"},
            {"role": "assistant", "content": "Noted, no meat then.", "timestamp": "2021-03-02T20:01:00-08:00"},
        ],
    )
    said = context(client, "session-tz", "suggest a dinner recipe with meat dishes")
    assert "### Conclusions\n- (2 March 2021) User does not eat meat" in said, said
    items, _ = evidence_items(coordinator.services, "session-tz", "vegetarian since college", 1_000, 10)
    assert [item.day for item in items if item.tier == "episodic"] == ["2 March 2021"]


def told(client: TestClient, who: str, session_id: str, text: str, said_at: str, answered_at: str) -> None:
    """A session of one user turn (``text`` at the ISO time ``said_at``) and its acknowledgement, ended."""
    turns = [
        {"role": "user", "content": text, "timestamp": said_at},
        {"role": "assistant", "content": "Noted!", "timestamp": answered_at},
    ]
    end(client, who, session_id, turns)


LONDON, BERLIN = "I live in London with my partner.", "I moved to Berlin, the flat is lovely."


def london_then_berlin(client: TestClient, who: str) -> None:
    """London said on 8 January 2024, then 'I moved to Berlin' on the evening of 31 March 2024 in California
    (1 April in UTC), in sessions ``jan`` and ``mar``: the London fact is closed by the move."""
    told(client, who, "jan", LONDON, "2024-01-08T08:00:00Z", "2024-01-08T08:01:00Z")
    told(client, who, "mar", BERLIN, "2024-03-31T20:00:00-07:00", "2024-03-31T20:01:00-07:00")


def test_a_superseded_fact_holds_until_the_local_month_the_later_one_was_said(client: TestClient) -> None:
    """'I moved to Berlin' said on the evening of 31 March 2024 in California (1 April in UTC): the London
    fact it closes was labelled 'until April 2024', the UTC month, though the move was said in March."""
    london_then_berlin(client, "until-tz")
    listed = client.get("/api/memory/memories", headers=user("until-tz")).json()["memories"]
    (closed,) = [m for m in listed if "London" in m["text"]]
    assert closed["validUntil"] == 1_711_940_400_000  # 2024-04-01T03:00Z: the instant is kept as it was
    said = context(client, "until-tz", "Which city does the user live in?")
    lines = said.splitlines()
    assert [line for line in lines if "User lives in London" in line and line.endswith("(until March 2024)")], said


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A couple of weeks ago I met her", [("A couple of weeks ago", "2023-04-24", "day")]),
        ("a couple weeks ago we left", [("a couple weeks ago", "2023-04-24", "day")]),
        ("We finished a couple of days ago.", [("a couple of days ago", "2023-05-06", "day")]),
        ("I've lived here for a couple of years", [("for a couple of years", "2021-05-08", "year")]),
        ("Two weekends ago we hiked", [("Two weekends ago", "2023-04-29", "weekend")]),
        ("We hiked a weekend ago", [("a weekend ago", "2023-05-06", "weekend")]),
        ("My birthday was on the 3rd.", [("the 3rd", "2023-05-03", "day")]),
        ("We met on the 30th", [("the 30th", "2023-04-30", "day")]),
        ("The party is on the 20th, bring a cake", [("the 20th", "2023-05-20", "day")]),
        ("I'll see you on the 31st", [("the 31st", "2023-05-31", "day")]),
        ("We moved in on the 8th", [("the 8th", "2023-05-08", "day")]),  # said that day: that day
    ],
)
def test_couples_weekends_ago_and_days_of_the_month_resolve(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Counted by "a couple" (two), weekends counted back (the Saturday of that week), a day of the month
    alone by its tense: the latest one in the past, the next one in the future (8 May 2023 is a Monday)."""
    assert dates(text) == expected


def test_a_day_of_the_month_skips_months_without_it_and_needs_a_tense() -> None:
    feb_10 = int(datetime(2023, 2, 10, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("I'll pay you on the 30th", feb_10) == [("the 30th", "2023-03-30", "day")]  # no 30 February
    assert dates("We met on the 31st", feb_10) == [("the 31st", "2023-01-31", "day")]
    assert dates("Rent is due on the 1st") == []  # no tense: every month's 1st
    for text in ("I live on the 3rd floor", "It was on the 2nd try"):  # rough counts: tests/test_dates_h14.py
        assert dates(text) == [], text


def test_couples_and_days_of_the_month_are_shown_resolved_in_the_context(client: TestClient) -> None:
    """Through HTTP, turns of Monday 8 May 2023: the context shows each expression's absolute date."""
    turns = [
        ("Gina", "A couple of weeks ago I adopted a greyhound named Biscuit."),
        ("Jon", "My dance studio opened on the 3rd, finally."),
    ]
    said = said_on_may_8(client, "dated-couple", turns, "greyhound Biscuit dance studio opened")
    assert "- Gina: A couple of weeks ago [= 24 April 2023] I adopted a greyhound named Biscuit." in said, said
    assert "- Jon: My dance studio opened on the 3rd [= 3 May 2023], finally." in said, said


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Last Christmas I gave you my heart", [("Last Christmas", "2022-12-25", "day")]),
        ("Next Christmas I'll be home", [("Next Christmas", "2023-12-25", "day")]),
        ("On New Year's Eve we partied", [("New Year's Eve", "2022-12-31", "day")]),
        ("I went there last Thanksgiving", [("last Thanksgiving", "2022-11-24", "day")]),  # 4th Thursday
        ("We painted eggs at Easter", [("Easter", "2023-04-09", "day")]),  # Easter Sunday 2023
        ("I'll call mom on Mother's Day", [("Mother's Day", "2023-05-14", "day")]),  # 2nd Sunday of May
        ("What are your plans for Halloween?", [("Halloween", "2023-10-31", "day")]),
        ("This past weekend I went hiking", [("This past weekend", "2023-05-06", "weekend")]),
        ("this coming weekend I'm free", [("this coming weekend", "2023-05-13", "weekend")]),
        ("This coming Friday I fly", [("This coming Friday", "2023-05-12", "day")]),
        ("Over the weekend we painted the house", [("the weekend", "2023-05-06", "weekend")]),
        ("I'll rest over the weekend", [("the weekend", "2023-05-13", "weekend")]),
        ("Mid-June I'll travel", [("June", "2023-06-08", "month")]),
        ("A week from today I fly", [("A week from today", "2023-05-15", "day")]),  # not "today"
        ("Three days from now is the exam", [("Three days from now", "2023-05-11", "day")]),
    ],
)
def test_holidays_and_weekends_said_in_other_words_resolve(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Holidays on the United States calendar, by last/next or the sentence's tense; "this past/coming"
    as last/next (8 May 2023 is a Monday; the days are calendar facts written out by hand)."""
    assert dates(text) == expected


def test_a_holiday_said_on_the_day_and_things_of_a_holiday() -> None:
    christmas = int(datetime(2023, 12, 25, 18, tzinfo=UTC).timestamp() * 1000)
    assert dates("We opened presents on Christmas", christmas) == [("Christmas", "2023-12-25", "day")]
    assert dates("Last Christmas was quieter", christmas) == [("Last Christmas", "2022-12-25", "day")]
    assert dates("I'll spend Christmas in Oslo", christmas) == [("Christmas", "2024-12-25", "day")]
    new_year = int(datetime(2024, 1, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert dates("What did you have for New Years Eve?", new_year) == [("New Years Eve", "2023-12-31", "day")]
    for text in (
        "I bought a Christmas tree",
        "I love Christmas music",
        "Merry Christmas!",
        "Easter is fun",  # no tense: any Easter
        "Did you get your New Years reservations in yet?",  # a thing of the holiday, not its day
        "I have celebrated New Years in New York once",  # a present perfect: no one day
        "I've never been anywhere for Christmas",
    ):
        assert dates(text, christmas) == [], text


def test_a_holiday_is_shown_resolved_in_the_context(client: TestClient) -> None:
    turns = [
        ("Gina", "On New Year's Eve we watched fireworks from the Brooklyn Bridge."),
        ("Jon", "That must have been so loud, my dog hates fireworks."),
    ]
    said = said_on_may_8(client, "dated-holiday", turns, "fireworks Brooklyn Bridge")
    assert "- Gina: On New Year's Eve [= 31 December 2022] we watched fireworks from the Brooklyn Bridge." in said


def test_a_possessive_date_keeps_its_s_before_the_note(client: TestClient) -> None:
    """ "Yesterday's party": the note follows the possessive, the word stays whole (before: "Yesterday [= …]'s")."""
    turns = [
        ("Gina", "Yesterday's party at the lake was the best one this year."),
        ("Jon", "I can't wait for next week’s match against the Hawks."),
    ]
    said = said_on_may_8(client, "dated-possessive", turns, "party lake match Hawks")
    assert "- Gina: Yesterday's [= 7 May 2023] party at the lake was the best one this year [= 2023]." in said
    assert "- Jon: I can't wait for next week’s [= week of 15 May 2023] match against the Hawks." in said
