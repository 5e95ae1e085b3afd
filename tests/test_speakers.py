"""A chat between two named people through the HTTP API: both people's facts kept, in their names."""

from __future__ import annotations

from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user

SAID_AT = 1_683_547_200_000  # Monday 8 May 2023, 12:00 UTC: "last week" is the week of 1 May 2023
TURNS = [
    {"role": "user", "name": "Gina", "content": "Hey Jon!"},
    {"role": "assistant", "name": "Jon", "content": "Hey Gina! How are you?"},
    {"role": "user", "name": "Gina", "content": "Not great. I lost my job at Door Dash last week."},
    {
        "role": "assistant",
        "name": "Jon",
        "content": "Oh no, sorry to hear that. I just opened my own studio in Denver.",
    },
    {"role": "user", "name": "Gina", "content": "Thanks! Good luck with the studio."},
]
TURNS = [turn | {"timestamp": SAID_AT + i * 60_000} for i, turn in enumerate(TURNS)]


def test_both_named_people_are_remembered_by_name(client: TestClient, coordinator: MemoryCoordinator) -> None:
    posted = client.post("/api/memory/sessions/chat-1/turns", json={"turns": TURNS}, headers=user("pair"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/chat-1/end", headers=user("pair")).json()
    assert ended["saved"] is True
    assert ended["episode"]["summary"] == (
        "Gina: I lost my job at Door Dash last week. Jon: I just opened my own studio in Denver."
    )
    for query, fact, (name, role, words) in (
        (
            "What happened to Gina's job?",
            "Gina lost their job at Door Dash last week [= week of 1 May 2023]",  # dated from the turn
            ("Gina", "user", "Not great. I lost my job at Door Dash last week"),
        ),
        (
            "What did Jon open in Denver?",
            "Jon just opened their own studio in Denver",
            ("Jon", "assistant", "Oh no, sorry to hear that. I just opened my own studio in Denver."),
        ),
    ):
        # a fact from each person (the assistant-role speaker too), in their name, found first
        assert [m.text for m in coordinator.search_memories("pair", query, 1)] == [fact]
        # search: the turn that holds the answer, with who said it
        hit = client.get("/api/memory/search", params={"q": query}, headers=user("pair")).json()["results"][0]
        top = hit["highlights"][0]
        assert (top["speaker"], top["role"], top["text"][: len(words)]) == (name, role, words)
        # context: their words, attributed to them (the fact says the same and is left out as a repeat)
        context = client.post("/api/memory/context", json={"query": query}, headers=user("pair")).json()["context"]
        assert f"{name}: {words}" in context and "- User " not in context


def test_greetings_between_named_people_are_not_saved(client: TestClient) -> None:
    hello = [TURNS[0], TURNS[1], {"role": "user", "name": "Gina", "content": "Good, thanks!"}]
    client.post("/api/memory/sessions/chat-2/turns", json={"turns": hello}, headers=user("pair"))
    ended = client.post("/api/memory/sessions/chat-2/end", headers=user("pair")).json()
    assert ended["saved"] is False and ended["reason"] == "greeting or small talk only"
