"""How turn hits rank sessions (issue 14, q1): a formula said in many sessions and a turn said by
someone the question does not name count less than the turn that answers.

Hand-written two-speaker sessions (Gina and Jon, dated days of June 2023) are replayed once through
``POST /api/memory/sessions/{id}/turns`` and ``…/end``; sessions are read back through
``GET /api/memory/search``. Expected values are literals.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import end_session, gina_jon_turns, isolated_app, user

FORMULA_USER = "q1-formula"  # the job and the sign-off sessions
SPEAKER_USER = "q1-speakers"  # Gina's work and Jon's work
JUNE_1 = datetime(2023, 6, 1, 18, 0, tzinfo=UTC)
# Jon signs off with the same words in five sessions of small talk (a formula)
FORMULA = "Okay I need to get back to work, chat later!"
SMALL_TALK = [
    ("Gina", "Hey Jon! How was the weekend?"),
    ("Jon", "Quiet, mostly cleaning the flat and cooking a big pot of soup."),
    ("Gina", "Soup sounds perfect for this rainy weather."),
    ("Jon", FORMULA),
]
JOB = [
    ("Gina", "Remind me, Jon, what do you do these days?"),
    ("Jon", "I'm a data analyst at Lumen Schools, been there two years now."),
    ("Gina", "Sounds busy! Is it a good team?"),
    ("Jon", "Great team, and the office has a view of the river."),
]
# each says once what their work is; Gina's turn shares a word more with the question
GINA_WORK = [
    ("Gina", "At work I do the payroll for a bakery, busy work."),
    ("Jon", "That sounds like a lot, take a break soon."),
    ("Gina", "I will, a weekend by the sea is planned."),
    ("Jon", "Good, enjoy the sea air."),
]
JON_WORK = [
    ("Jon", "Our workshop finished the oak table for the library today."),
    ("Gina", "A whole table? How long did that take?"),
    ("Jon", "Three weeks, at work I build furniture as a carpenter."),
    ("Gina", "Impressive, send me a photo of it."),
]
SESSIONS: dict[str, dict[str, tuple[datetime, list[tuple[str, str]]]]] = {
    FORMULA_USER: {
        "job": (JUNE_1, JOB),
        **{f"formula-{n}": (JUNE_1 + timedelta(days=n), SMALL_TALK) for n in range(1, 6)},
    },
    SPEAKER_USER: {
        "gina-work": (JUNE_1 + timedelta(days=10), GINA_WORK),
        "jon-work": (JUNE_1 + timedelta(days=11), JON_WORK),
    },
}


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app with :data:`SESSIONS` replayed."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("q1")) as (client, _, _):
        for user_id, sessions in SESSIONS.items():
            for sid, (start, lines) in sessions.items():
                ended = end_session(client, user_id, sid, gina_jon_turns(start, lines))
                assert ended["saved"], ended
        yield client


def search(client: TestClient, user_id: str, q: str, **params: Any) -> list[str]:
    response = client.get("/api/memory/search", params={"q": q, **params}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return [h["sessionId"] for h in response.json()["results"]]


def test_a_formula_said_in_many_sessions_does_not_outrank_the_answer(chat: TestClient) -> None:
    """The sign-off "Okay I need to get back to work, chat later!" is said in five sessions; the
    session where Jon says what his job is ranks among the first two when asked what he does for
    work (each sign-off session matches the question as well as the job's turns: without the
    discount, all five rank first and the job's session last)."""
    for question in ("What does Jon do for work?", "What does Jon do at work?"):
        ranked = search(chat, FORMULA_USER, question, limit=6)
        assert ranked.index("job") < 2, (question, ranked)


def test_a_turn_of_the_person_asked_about_outranks_the_other_persons(chat: TestClient) -> None:
    """Gina says what she does at work, and so does Jon (her turn matches the question a little
    better, and ranks first without the speaker's weight): asked what Jon does at work, his session
    comes first."""
    ranked = search(chat, SPEAKER_USER, "What does Jon do at work?", limit=10)
    assert ranked == ["jon-work", "gina-work"], ranked
