"""A question that names who speaks spends the context on their turns (issue 14).

In a two-person chat the evidence for "What did Gina say about …?" is Gina's turns; the other
person's matched turns are context, so they are cut as a neighbour is (``NEIGHBOUR_TOKENS``: the
sentences that share a word with the question), while the named person's stay whole (up to
``TURN_TOKENS``). A question that names no one keeps every matched turn whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from agtos.tasks.tokens import count_tokens
from tests.helpers import end_session, gina_jon_turns, isolated_app, user

USER = "gina-and-jon-tart"
START = datetime(2023, 5, 6, 18, 0, tzinfo=UTC)
FILLER = (
    "It took the whole afternoon because the oven at our place runs hot and unevenly. "
    "The crust cracked twice before it finally held together properly. "
    "My kitchen was covered in flour and sugar by the end of it. "
    "The neighbours came over in the evening and we sat outside until late."
)
JON_FIRST = "I baked a lemon tart for the neighbours, my first one."
GINA_FIRST = "My lemon tart was a disaster, I burnt the top."
JON_LONG = f"{JON_FIRST} {FILLER}"
GINA_LONG = f"{GINA_FIRST} {FILLER}"
LINES = [
    ("Gina", "Hey Jon! How was your weekend?"),
    ("Jon", JON_LONG),
    ("Gina", GINA_LONG),
    ("Jon", "Next time we should bake together."),
    ("Gina", "Deal, talk soon!"),
]


@pytest.fixture(scope="module")
def client(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("other-speaker")) as (test_client, _, _):
        assert end_session(test_client, USER, "tart-evening", gina_jon_turns(START, LINES))["saved"]
        yield test_client


def turn_lines(client: TestClient, query: str) -> set[str]:
    body = {"query": query, "token_budget": 2_000}
    response = client.post("/api/memory/context", json=body, headers=user(USER))
    assert response.status_code == 200, response.text
    return {i["text"] for i in response.json()["items"] if i["tier"] == "turn"}


def test_the_turns_are_long_enough_to_be_cut() -> None:
    assert 60 < count_tokens(JON_LONG) < 200 and 60 < count_tokens(GINA_LONG) < 200


def test_the_other_speakers_matched_turn_is_cut_the_named_ones_stays_whole(client: TestClient) -> None:
    lines = turn_lines(client, "What did Gina say about the lemon tart?")
    assert f"Gina: {GINA_LONG}" in lines
    assert f"Jon: {JON_FIRST} …" in lines and f"Jon: {JON_LONG}" not in lines
    lines = turn_lines(client, "What did Jon say about the lemon tart?")
    assert f"Jon: {JON_LONG}" in lines
    assert f"Gina: {GINA_FIRST} …" in lines and f"Gina: {GINA_LONG}" not in lines


def test_a_question_naming_no_one_keeps_every_matched_turn_whole(client: TestClient) -> None:
    lines = turn_lines(client, "Who talked about a lemon tart?")
    assert {f"Jon: {JON_LONG}", f"Gina: {GINA_LONG}"} <= lines
