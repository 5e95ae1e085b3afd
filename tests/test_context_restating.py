"""A context does not pay twice for the same words: an episode summary (sentences of the session's own
turns) keeps only the sentences the chosen turn lines do not say already, each under its speaker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agtos.tasks.context import ContextItem, fit_budget, unsaid
from agtos.tasks.text import content_words
from tests.helpers import isolated_app, user

USER = "restating-alice"
TURNS = [
    {"role": "user", "content": "What is the weather forecast for San Francisco?"},
    {"role": "assistant", "content": "Sunny, 19 degrees."},
    {"role": "user", "content": "I prefer metric units. My sister Ana moved to Lisbon last month."},
]
SUMMARY = (
    "User: What is the weather forecast for San Francisco? Assistant: Sunny, 19 degrees. "
    "User: I prefer metric units. My sister Ana moved to Lisbon last month."
)


def words(*lines: str) -> set[str]:
    return {w for line in lines for w in content_words(line)}


def test_a_summary_keeps_only_the_sentences_not_said_and_names_their_speaker_again() -> None:
    said = words("Assistant: Sunny, 19 degrees.", "User: I prefer metric units.")
    # the user's sentences on either side of the assistant's, now left out, read as the user's
    assert unsaid(SUMMARY, said) == (
        "User: What is the weather forecast for San Francisco? My sister Ana moved to Lisbon last month."
    )
    # the user's second sentence follows the user's first, left out: named as the user's again
    assert unsaid(SUMMARY, words("What is the weather forecast for San Francisco?", "I prefer metric units.")) == (
        "Assistant: Sunny, 19 degrees. User: My sister Ana moved to Lisbon last month."
    )
    assert unsaid(SUMMARY, said | words("What is the weather forecast for San Francisco?")) == (
        "User: My sister Ana moved to Lisbon last month."
    )
    assert unsaid(SUMMARY, words(*(t["content"] for t in TURNS))) == ""
    assert unsaid("Gina: I lost my job. Thanks!", words("I lost my job at Door Dash")) == ""  # no words: gone


def test_a_sentence_is_said_once_nine_of_its_ten_words_are() -> None:
    sentence = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet."  # 10 content words
    nine = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"}
    assert unsaid(sentence, nine) == ""  # 9 / 10 = the 0.9 share: said
    assert unsaid(sentence, nine - {"india"}) == sentence  # 8 / 10: kept


def test_fit_budget_writes_the_summary_without_what_the_turn_lines_said() -> None:
    day = 1_683_540_000_000  # 8 May 2023
    turn = ContextItem("turn", "ep-1.t1", "Assistant: Sunny, 19 degrees.", 1.0, day, "ep-1", "s1", position=1)
    summary = ContextItem("episodic", "ep-1", SUMMARY, 0.9, day, "ep-1", "s1")
    chosen, _ = fit_budget([turn, summary], 500)
    assert [i.text for i in chosen] == [
        "Assistant: Sunny, 19 degrees.",
        "User: What is the weather forecast for San Francisco? I prefer metric units. "
        "My sister Ana moved to Lisbon last month.",
    ]
    alone, _ = fit_budget([summary], 500)  # nothing chosen before it: the summary as stored
    assert [i.text for i in alone] == [SUMMARY]
    covered = ContextItem("episodic", "ep-2", "Assistant: Sunny, 19 degrees.", 0.9, day, "ep-2", "s2")
    assert [i.id for i in fit_budget([turn, covered], 500)[0]] == ["ep-1.t1"]
    # what every chosen line said counts, not only the last one's words
    said_first = ContextItem("turn", "ep-1.t0", TURNS[0]["content"], 0.95, day, "ep-1", "s1", position=0)
    chosen, _ = fit_budget([said_first, turn, summary], 500)
    assert [i.text for i in chosen][-1] == "User: I prefer metric units. My sister Ana moved to Lisbon last month."


@pytest.fixture(scope="module")
def client(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("restate")) as (test_client, _, _):
        posted = test_client.post("/api/memory/sessions/s1/turns", json={"turns": TURNS}, headers=user(USER))
        assert posted.status_code == 200, posted.text
        assert test_client.post("/api/memory/sessions/s1/end", headers=user(USER)).json()["saved"]
        yield test_client


def test_a_context_says_each_sentence_of_a_session_once(client: TestClient) -> None:
    response = client.post(
        "/api/memory/context", json={"query": "where does my sister live?", "token_budget": 600}, headers=user(USER)
    )
    assert response.status_code == 200, response.text
    text = response.json()["context"]
    assert text.count("My sister Ana moved to Lisbon") == 1, text
    assert text.count("Sunny, 19 degrees") <= 1, text
