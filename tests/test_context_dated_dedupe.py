"""A session summary sentence that repeats a dated turn line is left out of the context (issue 14 item 6,
"deduplicated across tiers"), also where the relative date ends inside a word ("Friday-night",
"yesterday-evening", "next week's").

The date note used to go right after the expression, cutting such a word in two ("Friday [= 5 May
2023]-night"): the turn line then lacked the word "friday-night" that the extractive summary quotes, and
the summary sentence, no longer seen as said (``tasks/context.py``'s ``unsaid``), came back under
"Relevant past sessions". The note now follows the whole word (``tasks/dates.py``'s ``annotate``); the
possessive ("next week's") was fixed before (d174ac2) and is kept here as a case.

One app for the module; each test is its own user, whose turns are said on Monday 8 May 2023 (UTC)
through a live session's ``…/turns`` and ``…/end`` and read back through ``POST /api/memory/context``
and ``GET /api/memory/episodes``. The dates are calendar facts written out by hand: Friday 5 May,
Sunday 7 May, Monday 1 May; the week of Monday 15 May; 2022.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.helpers import end_session, isolated_app, user


@pytest.fixture(scope="module")
def client(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("c5c")) as (test_client, _, _):
        yield test_client


def said_on_may_8(client: TestClient, who: str, gina: str, jon: str) -> tuple[str, str]:
    """Gina says ``gina`` and Jon answers, on Monday 8 May 2023; the session is ended (no LLM: the
    summary is extractive, the session's own sentences). Returns the session summary and the context
    for Gina's words."""
    turns = [
        {"role": "user", "name": "Gina", "content": gina, "timestamp": "2023-05-08T10:00:00Z"},
        {"role": "user", "name": "Jon", "content": jon, "timestamp": "2023-05-08T10:01:00Z"},
    ]
    assert end_session(client, who, "s1", turns)["saved"]
    listed = client.get("/api/memory/episodes", headers=user(who))
    assert listed.status_code == 200, listed.text
    (episode,) = listed.json()["episodes"]
    answer = client.post("/api/memory/context", json={"query": gina, "token_budget": 1_000}, headers=user(who))
    assert answer.status_code == 200, answer.text
    return str(episode["summary"]), str(answer.json()["context"])


@pytest.mark.parametrize(
    ("gina", "line", "words"),
    [
        pytest.param(
            "Our Friday-night pizza party at the lake house was loud and fun.",
            "- Gina: Our Friday-night [= 5 May 2023] pizza party at the lake house was loud and fun.",
            "pizza party at the lake house",
            id="hyphen",
        ),
        pytest.param(
            "I loved our Friday-night-in with pizza and old films.",
            "- Gina: I loved our Friday-night-in [= 5 May 2023] with pizza and old films.",
            "with pizza and old films",
            id="hyphens",
        ),
        pytest.param(
            "I booked the yesterday-evening flight to Denver.",
            "- Gina: I booked the yesterday-evening [= 7 May 2023] flight to Denver.",
            "flight to Denver",
            id="hyphen-part-of-day",
        ),
        pytest.param(  # a full stop ends the word: the context reads "week." and "It is downtown." as two sentences
            "Pottery class starts next week.It is downtown.",
            "- Gina: Pottery class starts next week [= week of 15 May 2023].It is downtown.",
            "Pottery class starts",
            id="no-space-after-the-full-stop",
        ),
        pytest.param(
            "I can't wait for next week's party at the lake house.",
            "- Gina: I can't wait for next week's [= week of 15 May 2023] party at the lake house.",
            "party at the lake house",
            id="possessive",
        ),
        pytest.param(
            "Last year’s trip to Lisbon was the best holiday ever.",
            "- Gina: Last year’s [= 2022] trip to Lisbon was the best holiday ever.",
            "trip to Lisbon",
            id="possessive-curly",
        ),
    ],
)
def test_a_summary_sentence_restating_a_dated_turn_line_is_left_out(
    client: TestClient, gina: str, line: str, words: str
) -> None:
    """The turn line holds its date note after the whole word and is written once; the summary sentence
    that quotes the same turn (the summary holds it: the premise) is not written again under "Relevant past
    sessions" (before: "Friday [= 5 May 2023]-night", and the summary line "(8 May 2023) Gina: Our
    Friday-night pizza party …" came too)."""
    summary, context = said_on_may_8(client, f"dedupe-{uuid.uuid4().hex[:8]}", gina, "Sounds good, tell me more.")
    assert f"Gina: {gina}" in summary
    assert "### Relevant past sessions" not in context, context
    assert context.count(words) == 1, context
    assert line in context.splitlines()


@pytest.mark.parametrize(
    ("gina", "line"),
    [
        pytest.param(  # Monday 1 May and Friday 5 May, said in the past tense
            "I worked Monday-Friday at the bakery.",
            "- Gina: I worked Monday [= 1 May 2023]-Friday [= 5 May 2023] at the bakery.",
            id="two-dates",
        ),
        pytest.param(  # 2 May 2023: the note names the first day, so it stays before the range's end
            "We met in Reno on May 2-3 for the conference.",
            "- Gina: We met in Reno on May 2 [= 2 May 2023]-3 for the conference.",
            id="day-range",
        ),
    ],
)
def test_a_note_stays_after_its_own_expression_where_the_word_goes_on_with_another(
    client: TestClient, gina: str, line: str
) -> None:
    """A word that holds a second date ("Monday-Friday") keeps a note for each, not one after the whole
    word for the first date; a number after the hyphen ("May 2-3") is a range, the note stays on its day."""
    _, context = said_on_may_8(client, f"dedupe-{uuid.uuid4().hex[:8]}", gina, "That is a long week.")
    assert line in context.splitlines(), context
