"""What a user sees of an episode of a chat between two people (issue 14 item 4): keywords that say what it
was about, the topic it was about, and facts that have someone in them. Conversations written for these tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from tests.helpers import end_session, user

START = datetime(2024, 3, 5, 18, 0, tzinfo=UTC)


def two_people(first: str, lines: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Turn bodies of a chat between two named people, a minute apart: ``first`` is the user."""
    stamp = int(START.timestamp() * 1000)
    return [
        {
            "role": "user" if name == first else "assistant",
            "name": name,
            "content": text,
            "timestamp": stamp + 60_000 * i,
        }
        for i, (name, text) in enumerate(lines)
    ]


SPIN = [
    ("Nora", "Hey Ben! This week I went to my first spin class at the new studio downtown."),
    ("Ben", "Good for you! How many classes do you go to in a week?"),
    ("Nora", "Three times a week now. The instructor plays loud techno and the first day was brutal."),
    ("Ben", "I love that. I go to a rowing class twice a week, it is simple but good."),
    ("Nora", "Spin is simple too, you add resistance every few minutes. I'm taking the early class on Friday."),
    ("Ben", "Good luck! I'm taking a day off this week, my rowing coach says the first rest day is the best."),
]

TRIPS = [
    ("Ines", "Our trips this year were to Crete, Lisbon and the Azores."),
    ("Omar", "Which of those trips did you like most?"),
    ("Ines", "Crete. The beaches are empty in October and the hotels are cheap."),
    ("Omar", "Were the flights long? I can never sleep on planes."),
    ("Ines", "Two flights with a change in Athens. I went running along the beach every morning."),
    ("Omar", "I was running late for both flights to Madeira last spring, the islands were worth it though."),
    ("Ines", "I kept to my diet there, grilled fish and salad every day."),
]

COLD_EVENING = [
    ("Lena", "How was the concert on Saturday?"),
    ("Paul", "It was kinda cold outside the hall. Time was running out before the encore."),
    ("Paul", "Marco is my cousin, he plays the cello in the orchestra."),
    ("Lena", "I'm a violin teacher at the music school on Elm Street."),
    ("Paul", "That was a long night."),
]


def test_keywords_name_what_the_chat_was_about_not_its_generic_words(client: TestClient) -> None:
    ended = end_session(client, "nora", "spin", two_people("Nora", SPIN))
    keywords = ended["episode"]["keywords"]
    generic = {"go", "good", "simple", "first", "day", "week", "times", "taking", "add", "love"}
    assert generic.isdisjoint(keywords), keywords
    assert not {"class", "classes"} <= set(keywords), keywords  # the singular or the plural, not both
    assert {"spin", "instructor", "techno", "rowing", "resistance"} <= set(keywords), keywords
    assert not {"nora", "ben"} & set(keywords), keywords  # the speakers are in every episode of theirs
    assert (
        ended["episode"]["keywords"]
        == client.get("/api/memory/episodes", headers=user("nora")).json()["episodes"][0]["keywords"]
    )


def test_an_episode_about_trips_is_travel_though_it_mentions_running_sleep_and_diet(client: TestClient) -> None:
    ended = end_session(client, "ines", "trips", two_people("Ines", TRIPS))
    assert ended["episode"]["topic"] == "travel"
    assert client.get("/api/memory/episodes", headers=user("ines")).json()["episodes"][0]["topic"] == "travel"


def test_small_talk_with_no_one_in_it_is_not_a_fact(client: TestClient) -> None:
    ended = end_session(client, "lena", "concert", two_people("Lena", COLD_EVENING))
    assert ended["saved"], ended
    memories = client.get("/api/memory/memories", headers=user("lena")).json()["memories"]
    assert {m["text"] for m in memories} == {
        "Marco is Paul's cousin, he plays the cello in the orchestra",  # a named subject: kept
        "Lena is a violin teacher at the music school on Elm Street",
    }  # not "It was kinda cold outside the hall", "Time was running out before the encore", "That was a long night"


MOVE = [
    ("Rosa", "We finally moved to New York City in March, the apartment is tiny."),
    ("Sam", "New York City is expensive. I grew up in New Orleans and the rent there was half."),
    ("Rosa", "The jazz clubs in New Orleans are the best, I went twice for the festival."),
    ("Sam", "Next time you visit New York City from here, bring me a bagel."),
]


def test_a_place_name_that_opens_with_new_keeps_it(client: TestClient) -> None:
    """'New' is a stop word, but it opens place names: 'new york city', not 'york city'; 'new orleans' at all."""
    keywords = end_session(client, "rosa", "move", two_people("Rosa", MOVE))["episode"]["keywords"]
    assert {"new york city", "new orleans"} <= set(keywords), keywords
    assert "york city" not in keywords and "orleans" not in keywords, keywords
