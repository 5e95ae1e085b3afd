"""Verbatim memory probed as a demanding user of the HTTP API would (issue 14, helper H3's probe):
each test is a bug the probe found through `agtos serve`, replayed through the HTTP path.

Expected dates are calendar facts written out by hand: 8 May 2023 was a Monday.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.helpers import user


def end(client: TestClient, user_id: str, session_id: str, turns: list[dict[str, Any]]) -> None:
    posted = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(user_id))
    assert posted.status_code == 200, posted.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(user_id))
    assert ended.status_code == 200 and ended.json()["saved"], ended.text


def memory_texts(client: TestClient, user_id: str) -> set[str]:
    listed = client.get("/api/memory/memories", params={"limit": 100}, headers=user(user_id))
    assert listed.status_code == 200, listed.text
    return {m["text"] for m in listed.json()["memories"]}


def context(client: TestClient, user_id: str, query: str, budget: int = 1_000) -> str:
    answer = client.post("/api/memory/context", json={"query": query, "token_budget": budget}, headers=user(user_id))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["context"])


def test_a_verb_ending_in_ly_is_conjugated_not_taken_for_an_adverb(client: TestClient) -> None:
    """'I fly to Lisbon' was stored as 'Zoë fly toes Lisbon' ('fly' read as an adverb like 'really',
    'to' conjugated as the verb); 'I rely on' as 'rely ons'."""
    end(
        client,
        "probe-ly",
        "s1",
        [
            {"role": "user", "name": "Zoë", "content": "I fly to Lisbon every summer for the jazz festival."},
            {"role": "assistant", "name": "Omar", "content": "I rely on my sister for babysitting on Fridays."},
        ],
    )
    texts = memory_texts(client, "probe-ly")
    assert "Zoë flies to Lisbon every summer for the jazz festival" in texts, texts
    assert "Omar relies on their sister for babysitting on Fridays" in texts, texts


def test_an_unpunctuated_long_turn_shows_the_words_that_match_in_the_context(client: TestClient) -> None:
    """A long turn without sentence ends (a dictated message) is one 'sentence' too long for a line:
    the context cut it from its start and the answer at its end was never shown."""
    chatter = "the weather in the valley was mild that week and my cousin repaired the fence behind the barn "
    said = chatter * 40 + "and the wifi password is tangerine kestrel"
    end(
        client,
        "probe-long",
        "dictated",
        [
            {"role": "user", "name": "Ann", "content": said, "timestamp": "2019-06-10T10:00:00Z"},
            {"role": "assistant", "name": "Bob", "content": "Noted.", "timestamp": "2019-06-10T10:01:00Z"},
        ],
    )
    assert "the wifi password is tangerine kestrel" in context(client, "probe-long", "What is the wifi password?")
