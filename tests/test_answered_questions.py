"""A one-question session whose answer tells something is kept (issue 14: keep the words).

The save rules dropped every one-question session answered in under 80 words as a "single-turn trivial
lookup", so what the assistant told ("What did you tell me the normal potassium range is?") was nowhere
in memory. Now such a session is kept at the lowest importance when an answer says something its
question did not (a number, an informative word of its own); greetings, small talk and lookups answered
with nothing ("I'm not sure, sorry.") are still skipped. Through the HTTP API, real Redis, real embedder.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import talk, user

ANSWERED = [
    ("When was the Eiffel Tower finished?", "In 1889.", "1889"),  # a number its only news
    (
        "How long can cooked rice stay in the fridge?",
        "Up to 4 days, in a sealed container.",
        "sealed container",
    ),
    ("Which river runs through Lyon?", "The Rhône, joined there by the Saône.", "Saône"),
    (
        "How do I get candle wax out of a tablecloth?",
        "Lay brown paper over it and press with a warm iron; the paper soaks up the wax.",
        "brown paper warm iron",
    ),
]


def search(client: TestClient, who: str, query: str) -> list[dict]:
    found = client.get("/api/memory/search", params={"q": query}, headers=user(who))
    assert found.status_code == 200, found.text
    results: list[dict] = found.json()["results"]
    return results


@pytest.mark.parametrize(
    ("question", "answer", "query"), ANSWERED, ids=["a year", "a quantity", "a name", "content words"]
)
def test_a_one_question_session_is_found_by_what_the_assistant_said(
    client: TestClient, question: str, answer: str, query: str
) -> None:
    body = talk(client, "asked", "s1", ("user", question), ("assistant", answer))
    assert (body["saved"], body["reason"]) == (True, "question answered"), body
    assert body["episode"]["importance"] == 0.3 and body["episode"]["type"] == "conversation", body["episode"]
    hits = search(client, "asked", query)
    assert hits and hits[0]["sessionId"] == "s1", hits
    assert answer in [h["text"] for h in hits[0]["highlights"]], hits[0]


def test_an_unanswered_statement_is_kept(client: TestClient) -> None:
    """One speaker's one turn with no reply is no lookup: the words are theirs (a named chat's last word)."""
    said = {"role": "user", "name": "Kevin", "content": "Using a good extra virgin olive oil really changes the sauce."}
    response = client.post("/api/memory/sessions/s1/turns", json={"turns": [said]}, headers=user("kevin"))
    assert response.status_code == 200, response.text
    ended = client.post("/api/memory/sessions/s1/end", headers=user("kevin"))
    assert ended.status_code == 200 and ended.json()["saved"] is True, ended.text
    assert search(client, "kevin", "olive oil")[0]["sessionId"] == "s1"


@pytest.mark.parametrize(
    ("turns", "reason"),
    [
        (
            [("user", "Hi there"), ("assistant", "Hello! What can I do for you?"), ("user", "Ok, thanks!")],
            "greeting or small talk only",
        ),
        ([("user", "What time is it in Tokyo?"), ("assistant", "I'm not sure, sorry.")], "single-turn trivial lookup"),
        # the answer's words are the question's: it tells nothing
        (
            [("user", "Can you check the time in Tokyo?"), ("assistant", "Sorry, I can't check the time.")],
            "single-turn trivial lookup",
        ),
        ([("user", "What time is it in Tokyo?")], "single-turn trivial lookup"),
    ],
    ids=["greeting", "answered with nothing", "answered with the question's words", "unanswered question"],
)
def test_sessions_with_nothing_to_recall_are_still_skipped(
    client: TestClient, turns: list[tuple[str, str]], reason: str
) -> None:
    body = talk(client, "idle", "s1", *turns)
    assert (body["saved"], body["reason"]) == (False, reason), body
    assert search(client, "idle", "Tokyo") == [] and search(client, "idle", "hello") == []
