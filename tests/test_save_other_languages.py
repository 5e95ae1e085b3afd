"""A one-turn session in another language is kept (issue 14: nothing a user said is lost): the save rules'
patterns are English, so "Ich wohne in Berlin und bin Vegetarier." found no fact and was dropped as a
"single-turn trivial lookup" (helper 8's probe). English trivial lookups are still skipped."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user


def ended(client: TestClient, who: str, session: str, said: str) -> dict:
    turns = [{"role": "user", "content": said}, {"role": "assistant", "content": "OK."}]
    sent = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert sent.status_code == 200, sent.text
    answer = client.post(f"/api/memory/sessions/{session}/end", params={"wait": "30"}, headers=user(who))
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize(
    ("said", "query"),
    [
        ("Ich wohne in Berlin und bin Vegetarier.", "Vegetarier"),
        ("Je suis végétarien et j'habite à Lyon depuis mars.", "Lyon"),
        ("日本語で話しましょう、私は東京に住んでいます", "東京に住んでいます"),
    ],
    ids=["german", "french", "japanese"],
)
def test_a_one_turn_session_in_another_language_is_kept_and_found(client: TestClient, said: str, query: str) -> None:
    body = ended(client, "lang", "s1", said)
    assert body["saved"] is True, body
    hits = client.get("/api/memory/search", params={"q": query}, headers=user("lang")).json()
    assert hits["results"] and hits["results"][0]["sessionId"] == "s1", hits


def test_an_english_trivial_lookup_is_still_skipped(client: TestClient) -> None:
    body = ended(client, "lang2", "s1", "What time is it in Tokyo?")
    assert (body["saved"], body["reason"]) == (False, "single-turn trivial lookup"), body
