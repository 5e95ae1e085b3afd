"""Knowledge updates (issue 14): a later fact that ends an earlier one ranks its session first for a
question about now, even when the session is not among the hits or shares no word with the question,
and a question about what happened still finds the session where it happened.

"Where do I work now?" shares no word with "I left Kelvin Labs and started at Orchard Logistics"; the
superseded "I work at Kelvin Labs" session won, or a newer one full of "work". "What car do I have?"
shares no word with "User bought a used Ford Fiesta", so its sale did not move it down. And once a sale
ended a purchase, the purchase session went below the sale for "Which car did I buy last year?" too,
though the question asks what happened, not what is true now. Through the HTTP API, real Redis, real
embedder.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from tests.helpers import end_session, user

DAY_MS = 86_400_000
START_MS = int(datetime(2024, 2, 1, 9, tzinfo=UTC).timestamp() * 1000)


def said_on(client: TestClient, who: str, session: str, day: int, user_said: str, reply: str) -> None:
    """A two-turn session ``day`` days after :data:`START_MS`, ended and saved."""
    at = START_MS + day * DAY_MS
    turns = [
        {"role": "user", "content": user_said, "timestamp": at},
        {"role": "assistant", "content": reply, "timestamp": at + 60_000},
    ]
    assert end_session(client, who, session, turns)["saved"] is True


def first_session(client: TestClient, who: str, query: str) -> str:
    """The session of the only hit of a search for one (a later session is read in when it replaced that hit)."""
    found = client.get("/api/memory/search", params={"q": query, "limit": 1}, headers=user(who))
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert len(results) == 1, found.json()
    return str(results[0]["sessionId"])


JOB = [
    ("old", 0, "I work at Kelvin Labs as an analyst. What are the best trails in Madeira?", "Try the Pico Ruivo path."),
    ("new", 30, "I left Kelvin Labs and started at Orchard Logistics. What could I cook for six?", "A paella."),
    # newer still, and it says "work" twice: the best match for the words, without the job in it
    ("desk", 40, "What plants would work on a desk at work?", "A snake plant or a pothos."),
]


def test_a_job_change_answers_where_i_work_now(client: TestClient) -> None:
    """The job change says no word of the question; the fact it ended ("User works at Kelvin Labs")
    leads to it (its current replacement), ahead of both the older job and a newer session full of "work"."""
    for name, day, user_said, reply in JOB:
        said_on(client, "job", name, day, user_said, reply)
    memories = client.get("/api/memory/memories", headers=user("job")).json()["memories"]
    by_text = {m["text"]: m for m in memories}
    newer = by_text["User left Kelvin Labs and started at Orchard Logistics"]
    assert by_text["User works at Kelvin Labs as an analyst"]["supersededBy"] == newer["id"], memories
    assert first_session(client, "job", "Where do I work now?") == "new"


SALE = [
    ("bought", 0, "I bought a used Ford Fiesta last Tuesday, my first car in years!", "Congratulations on the car!"),
    ("sold", 60, "I sold the Ford Fiesta. I'm riding my bike to work now.", "Cycling to work is a great habit."),
]


@pytest.mark.parametrize(
    ("query", "session"),
    [
        ("What car did I buy?", "bought"),  # what happened: the purchase, though a sale ended it
        ("Which car did I buy last year?", "bought"),
        ("When did I buy my car?", "bought"),
        ("Which car did I end up with?", "sold"),  # how it turned out
        ("Do I still have the Ford Fiesta?", "sold"),  # how things are now: the sale
        ("What car do I have now?", "sold"),
        ("What car do I have?", "sold"),
        ("What car do I drive?", "sold"),
        ("Which car is mine?", "sold"),
    ],
    ids=[
        "did buy",
        "did buy last year",
        "when did buy",
        "end up with",
        "still have",
        "have now",
        "have",
        "drive",
        "mine",
    ],
)
def test_a_question_about_what_happened_finds_it_after_a_later_fact_ended_it(
    client: TestClient, query: str, session: str
) -> None:
    for name, day, user_said, reply in SALE:
        said_on(client, "gina", name, day, user_said, reply)
    assert first_session(client, "gina", query) == session


CITY = [
    ("graz", 0, "I live in Graz. What nature writing books would you suggest?", "Try Robert Macfarlane."),
    ("leeds", 100, "We finally moved from Graz to Leeds last month. What exercises help balance?", "Try yoga."),
    ("dream", 110, "Which city would be nice to live in? I love the sea.", "Lisbon is lovely and by the sea."),
]


def test_where_i_live_now_finds_the_move_that_names_neither_word(client: TestClient) -> None:
    """ "Which city do I live in now?" shares no word with "moved from Graz to Leeds", and a newer session
    matches it better ("Which city would be nice to live in?"): the session of the current value of
    where the user lives (the fact that superseded "User lives in Graz") comes first."""
    for name, day, user_said, reply in CITY:
        said_on(client, "mover", name, day, user_said, reply)
    found = client.get(
        "/api/memory/search", params={"q": "Which city do I live in now?", "limit": 1}, headers=user("mover")
    )
    assert found.status_code == 200, found.text
    assert [r["sessionId"] for r in found.json()["results"]] == ["leeds"], found.json()


NEIGHBOURHOOD = [
    ("columbus", 0, "I grew up in Cork, but I moved to Columbus in 2009 for college.", "What a change!"),
    (
        "stonegate",
        200,
        "We finally moved three days ago! The new place is in Stonegate, I love the neighbourhood.",
        "Yay!",
    ),
]


def test_a_value_never_updated_does_not_outrank_a_later_move(client: TestClient) -> None:
    """ "User moved to Columbus" is a value of where the user lives that no fact replaced (the later move
    names no claim the rules read): it is not taken for the current value, the newer session stays first."""
    for name, day, user_said, reply in NEIGHBOURHOOD:
        said_on(client, "sam", name, day, user_said, reply)
    assert first_session(client, "sam", "Which neighbourhood do I live in now?") == "stonegate"
