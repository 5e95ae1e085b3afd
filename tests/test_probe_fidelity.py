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


def test_relative_dates_resolve_on_the_local_day_the_offset_names(client: TestClient) -> None:
    """A turn sent as 2023-05-09T01:00+09:00 was said on Tuesday 9 May in Tokyo (8 May in UTC):
    its 'yesterday' is 8 May and its line sits under 9 May. One sent as 2023-05-08T20:00-07:00 was
    said on Monday 8 May (9 May in UTC): 'yesterday' is 7 May. Both were read in UTC, a day off."""
    end(
        client,
        "probe-tz",
        "tokyo",
        [
            {
                "role": "user",
                "content": "I visited the aquarium yesterday with my nephew.",
                "timestamp": "2023-05-09T01:00:00+09:00",
            },
            {"role": "assistant", "content": "Sounds fun.", "timestamp": "2023-05-09T01:01:00+09:00"},
        ],
    )
    end(
        client,
        "probe-tz",
        "oregon",
        [
            {
                "role": "user",
                "content": "I ran a marathon yesterday in the rain.",
                "timestamp": "2023-05-08T20:00:00-07:00",
            },
            {"role": "assistant", "content": "Well done.", "timestamp": "2023-05-08T20:01:00-07:00"},
        ],
    )
    found = client.get("/api/memory/search", params={"q": "aquarium nephew"}, headers=user("probe-tz")).json()
    top = found["results"][0]
    assert top["sessionId"] == "tokyo"
    assert top["highlights"][0]["text"] == "I visited the aquarium yesterday [= 8 May 2023] with my nephew."
    aquarium = context(client, "probe-tz", "When did I visit the aquarium?")
    assert "9 May 2023:\n- User: I visited the aquarium yesterday [= 8 May 2023] with my nephew." in aquarium, aquarium
    marathon = context(client, "probe-tz", "When did I run the marathon?")
    assert "8 May 2023:\n- User: I ran a marathon yesterday [= 7 May 2023] in the rain." in marathon, marathon
    assert "User ran a marathon yesterday [= 7 May 2023] in the rain" in memory_texts(client, "probe-tz")


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


def test_a_back_filled_session_started_with_an_offset_dates_its_turns_on_that_local_day(client: TestClient) -> None:
    """Turns sent without a time take the session's ``started_at``, and with it the day it names."""
    session = {
        "id": "tokyo-log",
        "started_at": "2023-05-09T01:00:00+09:00",
        "turns": [
            {"role": "user", "content": "I bought a bonsai tree yesterday at the night market."},
            {"role": "assistant", "content": "Lovely."},
        ],
    }
    stored = client.post("/api/memory/conversations", json={"sessions": [session]}, headers=user("probe-tz-log"))
    assert stored.status_code == 200, stored.text
    found = client.get("/api/memory/search", params={"q": "bonsai tree"}, headers=user("probe-tz-log")).json()
    assert found["results"][0]["highlights"][0]["text"] == (
        "I bought a bonsai tree yesterday [= 8 May 2023] at the night market."
    )


def test_a_conclusion_line_is_dated_when_it_was_said_not_when_the_dreamer_ran(client: TestClient) -> None:
    """'I'm vegetarian' said on 2 March 2021 became the conclusion line '(<today>) User does not eat
    meat…': dated by the Dreamer's run, it told the reader the fact was new."""
    end(
        client,
        "probe-dated-conclusion",
        "diet",
        [
            {"role": "user", "content": "I'm vegetarian since college.", "timestamp": "2021-03-02T09:00:00Z"},
            {
                "role": "assistant",
                "content": "Good to know, I will keep that in mind.",
                "timestamp": "2021-03-02T09:01:00Z",
            },
        ],
    )
    said = context(client, "probe-dated-conclusion", "suggest a dinner recipe with meat dishes")
    assert (
        "### Conclusions\n- (2 March 2021) User does not eat meat, so recommendations should avoid meat dishes" in said
    )


def test_keyword_search_reads_accented_and_non_latin_words(client: TestClient) -> None:
    """Words were cut to ASCII letters: 'Café Müller' was indexed as 'caf m ller', so 'Cafe Muller' found
    nothing, and a Russian turn had no keyword at all ('Москве' found nothing)."""
    end(
        client,
        "probe-unicode",
        "berlin",
        [
            {"role": "user", "name": "Zoë Ñúñez", "content": "My favourite café is Café Müller near the station."},
            {"role": "assistant", "name": "Max", "content": "Nice spot."},
        ],
    )
    end(
        client,
        "probe-unicode",
        "moscow",
        [
            {"role": "user", "name": "Алёна", "content": "Я живу в Москве и работаю врачом."},
            {"role": "assistant", "name": "Max", "content": "Понятно."},
        ],
    )

    def keyword_hits(query: str) -> list[str]:
        params = {"q": query, "mode": "bm25"}
        found = client.get("/api/memory/search", params=params, headers=user("probe-unicode"))
        assert found.status_code == 200, found.text
        return [hit["sessionId"] for hit in found.json()["results"]]

    assert keyword_hits("Cafe Muller") == ["berlin"]
    assert keyword_hits("café müller") == ["berlin"]
    assert keyword_hits("Zoe Nunez") == ["berlin"]
    assert keyword_hits("Москве") == ["moscow"]


def test_a_stretched_greeting_is_a_greeting_not_the_summary(client: TestClient) -> None:
    """'Hiii how was your Monday?' opened a two-person session's summary: 'hiii' (and 'heyyy',
    'byeee') counted as words that carry content, as 'hi' does not."""
    turns = [
        ("Jon", "Hiii how was your Monday?"),
        ("Gina", "Heyyy how are things?"),
        ("Gina", "We finally moved into the new flat in Fairmount, it has a bakery downstairs."),
        ("Jon", "I accepted an offer from Ironbridge Labs, better hours."),
        ("Gina", "Byeee Jon!"),
    ]
    body = [
        {
            "role": "user" if who == "Jon" else "assistant",
            "name": who,
            "content": text,
            "timestamp": 1_687_000_000_000 + i,
        }
        for i, (who, text) in enumerate(turns)
    ]
    posted = client.post("/api/memory/sessions/moving/turns", json={"turns": body}, headers=user("probe-greeting"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/moving/end", headers=user("probe-greeting")).json()
    summary = ended["episode"]["summary"]
    assert summary.startswith("Gina: We finally moved into the new flat in Fairmount"), summary
    assert not {"Hiii", "Heyyy", "Byeee", "Monday"} & set(summary.replace("?", " ").replace("!", " ").split()), summary


def test_a_calendar_week_is_named_by_its_monday_a_count_of_weeks_by_its_day(client: TestClient) -> None:
    """Said on Wednesday 10 May 2023, 'next week' was shown as 'week of 17 May' (a Wednesday, the
    turn's day plus seven): a calendar week is named by its first day, Monday 15 May. A count of
    weeks names the day that many weeks away: 'three weeks ago' is 19 April (it said 'week of 19 April',
    a week that starts on no Wednesday)."""
    said = "Next week I start yoga. Three weeks ago I broke my wrist."
    end(
        client,
        "probe-weeks",
        "wednesday",
        [
            {"role": "user", "name": "Ann", "content": said, "timestamp": "2023-05-10T10:00:00Z"},
            {
                "role": "assistant",
                "name": "Bob",
                "content": "Take care of that wrist.",
                "timestamp": "2023-05-10T10:01:00Z",
            },
        ],
    )
    found = client.get("/api/memory/search", params={"q": "yoga wrist"}, headers=user("probe-weeks")).json()
    assert found["results"][0]["highlights"][0]["text"] == (
        "Next week [= week of 15 May 2023] I start yoga. Three weeks ago [= 19 April 2023] I broke my wrist."
    )


def test_a_speaker_named_without_accents_is_still_that_speaker(client: TestClient) -> None:
    """'What does Zoe do for work?' about the speaker 'Zoë': the unaccented name was not read as a
    speaker, so it stayed in the query (matching every line Zoë said) and Omar's job came with
    hers; written 'Zoë', only the facts about her are candidates."""
    for k, (said_by, work) in enumerate(
        [
            ("Zoë", "I work as a marine biologist at the Lisbon Oceanarium."),
            ("Omar", "I work as a structural engineer at Arup."),
        ]
    ):
        end(
            client,
            "probe-accents",
            f"s{k}",
            [
                {"role": "user", "name": "Zoë", "content": "How was your weekend?", "timestamp": 1_680_000_000_000 + k},
                {
                    "role": "assistant",
                    "name": "Omar",
                    "content": "Calm, I read a lot.",
                    "timestamp": 1_680_000_060_000 + k,
                },
                {
                    "role": "user" if said_by == "Zoë" else "assistant",
                    "name": said_by,
                    "content": work,
                    "timestamp": 1_680_000_120_000 + k,
                },
            ],
        )
    for query in ("What does Zoë do for work?", "What does Zoe do for work?"):
        said = context(client, "probe-accents", query, 300)
        assert "Zoë works as a marine biologist at the Lisbon Oceanarium" in said, said
        assert "Omar works as a structural engineer at Arup" not in said, said


def test_no_habit_of_user_is_concluded_from_a_chat_between_two_named_people(client: TestClient) -> None:
    """Two morning chats of Zoë and Omar on one topic gave 'User is a morning person who checks
    weekend first thing in the day' and 'User regularly asks about weekend': neither is anyone's."""
    for k in range(2):
        end(
            client,
            "probe-habit",
            f"morning-{k}",
            [
                {
                    "role": "user",
                    "name": "Zoë",
                    "content": "How was your weekend?",
                    "timestamp": f"2023-0{k + 1}-05T09:00:00Z",
                },
                {
                    "role": "assistant",
                    "name": "Omar",
                    "content": "A calm weekend, I read a lot.",
                    "timestamp": f"2023-0{k + 1}-05T09:01:00Z",
                },
                {
                    "role": "user",
                    "name": "Zoë",
                    "content": "My weekend was busy, I baked bread.",
                    "timestamp": f"2023-0{k + 1}-05T09:02:00Z",
                },
            ],
        )
    listed = client.get("/api/memory/conclusions", headers=user("probe-habit"))
    assert listed.status_code == 200, listed.text
    texts = [c["text"] for c in listed.json()["conclusions"]]
    assert not [t for t in texts if t.startswith("User ")], texts


def test_a_transcript_pasted_with_its_names_is_attributed_once(client: TestClient) -> None:
    """A LoCoMo-shaped session ("Caroline: I went …" as user/assistant contents, kept as sent): the
    context and /ask's evidence said "Caroline: Caroline: I went …" (the name read from the prefix, then
    the prefix again), a few tokens lost on every line."""
    said = 1_683_547_200_000  # Monday 8 May 2023, 12:00 UTC
    turns = [
        {"role": "user", "content": "Caroline: I went to the LGBTQ support group yesterday.", "timestamp": said},
        {"role": "assistant", "content": "Melanie: That sounds empowering! How was it?", "timestamp": said + 60_000},
        {
            "role": "user",
            "content": "Caroline: Really moving, such stories.",
            "timestamp": said + 120_000,
        },
        {"role": "assistant", "content": "Melanie: I painted a sunrise over the lake last week.", "timestamp": said},
    ]
    end(client, "probe-pasted", "locomo-1", turns)
    lines = context(client, "probe-pasted", "When did Caroline go to the support group?").splitlines()
    assert "- Caroline: I went to the LGBTQ support group yesterday [= 7 May 2023]." in lines
    assert not [line for line in lines if "Caroline: Caroline:" in line or "Melanie: Melanie:" in line]
    asked = client.post("/api/memory/ask", json={"question": "What did Melanie paint?"}, headers=user("probe-pasted"))
    evidence = [e["text"] for e in asked.json()["evidence"] if e["kind"] == "turn"]
    assert evidence and not [t for t in evidence if t.startswith("Melanie: Melanie:")], evidence


def test_an_irregular_past_tense_is_not_conjugated_again() -> None:
    """'I lent my tent to my cousin' was stored as 'Gina lents their tent …' (found by H1's audit)."""
    from agtos.tasks.person_rewrite import third_person

    assert third_person("I lent my tent to my cousin", "Gina") == "Gina lent their tent to their cousin"
    assert third_person("I swept the floor", "Omar") == "Omar swept the floor"
    assert third_person("I buy bread", "Gina") == "Gina buys bread"  # a present tense still takes its -s
