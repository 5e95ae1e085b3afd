"""Sessions where the assistant answers at length (issue 14, assistset): a list of recommendations is kept
and its items reach the context.

A one-question session answered by a 300-word list was dropped as a "single-turn trivial lookup", so
"which hotel did you suggest?" found nothing; and a long reply whose heading matched the question showed
the heading alone ("Here are some hotels in Porto: …"), the list under it cut although the line's
200-token allowance was mostly unused.
"""

# ruff: noqa: E501 - the reply is prose, one list item a line

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user

HOTELS = """Here are some well-reviewed hotels in Porto, all within easy reach of the station:

1. **Casa Mirador**: it has a rooftop terrace looking over the old town. Reviews mention friendly staff and quiet rooms. Book early for weekends, as it tends to fill up fast.
2. **Pension Adler**: it includes a generous breakfast buffet in the room price. The rooms are on the small side but spotless. Wi-Fi is free and reliable enough for video calls.
3. **Hotel Kestrel**: it lends bicycles to guests for free. Ask for a courtyard room if you are a light sleeper. There is a good bakery on the corner for an early coffee.
4. **The Saltworks Inn**: it occupies a converted nineteenth-century warehouse. Check-in starts at 3 pm, but they will hold your luggage earlier. Guests often praise the comfortable beds.
5. **Villa Serena**: it has a small spa with a sauna and a plunge pool. Prices go up noticeably during festivals, so compare dates. The neighbourhood is lively in the evening without being noisy.
6. **Hostal Lumen**: it welcomes dogs at no extra charge. It is a solid all-rounder. The main downside is that it can be hard to find.
7. **The Granary Suites**: it has family rooms with two separate bedrooms. People who tried it tend to come back to it. It is a safe choice if you are unsure.

If you tell me your budget per night, I can narrow this down to one or two."""


def end_session(client: TestClient, who: str, session: str, turns: list[tuple[str, str]]) -> dict:
    body = {"turns": [{"role": role, "content": text} for role, text in turns]}
    sent = client.post(f"/api/memory/sessions/{session}/turns", json=body, headers=user(who))
    assert sent.status_code == 200, sent.text
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": "30"}, headers=user(who))
    assert ended.status_code == 200, ended.text
    return ended.json()


def context(client: TestClient, who: str, query: str) -> str:
    answer = client.post("/api/memory/context", json={"query": query, "token_budget": 1000}, headers=user(who))
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["context"]
    return text


def test_one_question_answered_by_a_long_list_is_kept(client: TestClient) -> None:
    request = "Could you suggest some places to stay in Porto? Ideally close to the train station."
    body = end_session(client, "lists1", "s1", [("user", request), ("assistant", HOTELS)])
    assert (body["saved"], body["reason"]) == (True, "question answered"), body
    assert "Hotel Kestrel" in context(client, "lists1", "Which hotel in Porto lends bicycles to guests?")


def test_a_one_line_answer_to_one_question_is_kept_too(client: TestClient) -> None:
    """Not only long answers: a one-line answer with a value of its own is kept (tests/test_answered_questions.py)."""
    body = end_session(client, "lists2", "s1", [("user", "What time is it in Tokyo?"), ("assistant", "9 pm.")])
    assert (body["saved"], body["reason"]) == (True, "question answered"), body


def test_a_matched_list_heading_brings_the_items_under_it(client: TestClient) -> None:
    turns = [
        ("user", "I'm going to Porto in May. Can you recommend a few hotels near the main station?"),
        ("assistant", HOTELS),
        ("user", "I'll be travelling with my sister Marta, she plans everything."),
        ("assistant", "Lovely, have a great trip together!"),
    ]
    assert end_session(client, "lists3", "s1", turns)["saved"] is True
    text = context(client, "lists3", "In the list of hotels in Porto you gave me, what was the second one?")
    assert "Here are some well-reviewed hotels in Porto" in text
    assert "Casa Mirador" in text and "Pension Adler" in text  # the first two items, under the heading
