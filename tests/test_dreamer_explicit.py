"""Issue 16: the Dreamer's explicit conclusions cite episodes and turns; the profile holds real
preferences and key facts, each with its source."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.tasks.explicit import statements_of
from tests.helpers import user

LISBON = [
    ("user", "Hi!"),
    ("assistant", "Hello! How can I help you today?"),
    ("user", "I just moved to Lisbon last month with my wife Ana and our dog Pixel."),
    ("assistant", "Welcome to Lisbon! How are you settling in?"),
    ("user", "Pretty well. I started a new job at Feedzai as a data engineer. My manager is called Rui."),
    ("assistant", "Congratulations on the new job!"),
    ("user", "Can you remind me about my Portuguese class on Thursday? Oh, and I am allergic to peanuts."),
    ("assistant", "Sure, I will remind you. Noted about the peanuts."),
    ("user", "I love grilled sardines but I hate crowded beaches."),
    ("assistant", "Good to know!"),
]
#: text -> (category, position of the turn that says it)
EXPECTED = {
    "User lives in Lisbon": ("home", 2),
    "User's wife is Ana": ("family", 2),
    "User has a dog named Pixel": ("pet", 2),
    "User works at Feedzai as a data engineer": ("job", 4),
    "User's manager is Rui": ("job", 4),
    "User is allergic to peanuts": ("allergy", 6),
    "User loves grilled sardines": ("preference", 8),
}


def end_session(client: TestClient, who: str, sid: str, turns: list[tuple[str, str]]) -> str:
    body = {"turns": [{"role": r, "content": c} for r, c in turns]}
    assert client.post(f"/api/memory/sessions/{sid}/turns", json=body, headers=user(who)).status_code == 200
    ended = client.post(f"/api/memory/sessions/{sid}/end", headers=user(who)).json()
    assert ended["saved"] is True, ended
    return str(ended["episode"]["id"])


def exported_turns(coordinator: MemoryCoordinator, who: str, tmp_path: Path) -> dict[str, str]:
    export_snapshot(coordinator.services, tmp_path / "snap", users=[who])
    rows = pq.read_table(tmp_path / "snap" / "turns.parquet").to_pylist()
    return {f"{t['episode_id']}.t{t['position']}": t["content"] for t in rows}


def test_lisbon_session_gives_explicit_conclusions_citing_episode_and_turn(
    client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path
) -> None:
    episode = end_session(client, "maria", "lisbon", LISBON)
    found = client.get("/api/memory/conclusions", headers=user("maria")).json()["conclusions"]
    explicit = {c["text"]: c for c in found if c["type"] == "explicit"}
    said = exported_turns(coordinator, "maria", tmp_path)
    for text, (category, position) in EXPECTED.items():
        assert text in explicit, (text, sorted(explicit))
        conclusion = explicit[text]
        assert conclusion["category"] == category
        assert 0.8 <= conclusion["confidence"] <= 1.0
        assert conclusion["source_episode_ids"] == [episode]
        assert conclusion["source_turn_ids"] == [f"{episode}.t{position}"]
        assert conclusion["source_turn_ids"][0] in said  # the id resolves to the turn as stored
    assert said[f"{episode}.t6"].endswith("I am allergic to peanuts.")
    # greetings, the reminder request and the assistant's words state nothing about the user
    assert not any("Portuguese" in t or "remind" in t.lower() or t == "Hi" for t in explicit)
    assert not any(t.startswith("Assistant") for t in explicit)
    deduced = [c for c in found if c["type"] == "deductive"]
    assert [c["text"] for c in deduced] == ["User must avoid peanuts, so food suggestions should leave it out"]
    assert deduced[0]["source_turn_ids"] == [f"{episode}.t6"]


def test_profile_holds_preferences_and_key_facts_with_their_sources(client: TestClient) -> None:
    episode = end_session(client, "maria", "lisbon", LISBON)
    profile = client.get("/api/memory/profile", headers=user("maria")).json()["profile"]
    assert profile["preferences"] == ["User loves grilled sardines", "User hates crowded beaches"]
    assert set(profile["facts"]) == {t for t, (category, _) in EXPECTED.items() if category != "preference"}
    for line in profile["preferences"] + profile["facts"]:
        cited = profile["sources"][line]
        assert cited[0].startswith("con-") and episode in cited and any(c.startswith(f"{episode}.t") for c in cited)
    assert profile["sources"]["User is allergic to peanuts"][1:] == [episode, f"{episode}.t6"]
    # a line the user set stays, the derived ones are rebuilt (not repeated) at the next run
    put = {"preferences": ["window seats", *profile["preferences"]]}
    assert client.put("/api/memory/profile", json=put, headers=user("maria")).status_code == 200
    assert client.post("/api/memory/dream", headers=user("maria")).status_code == 200
    again = client.get("/api/memory/profile", headers=user("maria")).json()["profile"]
    assert again["preferences"] == ["window seats", "User loves grilled sardines", "User hates crowded beaches"]
    assert "window seats" not in again["sources"]


def test_a_two_person_chat_attributes_statements_to_each_speaker(client: TestClient) -> None:
    turns = [
        {"role": "user", "name": "Gina", "content": "Hey Jon! I'm allergic to cats, sadly. How was your week?"},
        {"role": "assistant", "name": "Jon", "content": "Great! I work as a nurse at St Mary's Hospital now."},
        {"role": "user", "name": "Gina", "content": "Wow, I love that! I really enjoy painting landscapes."},
        {"role": "assistant", "name": "Jon", "content": "I moved to Denver with my sister Kate."},
    ]
    assert client.post("/api/memory/sessions/gj/turns", json={"turns": turns}, headers=user("gj")).status_code == 200
    assert client.post("/api/memory/sessions/gj/end", headers=user("gj")).json()["saved"] is True
    found = {c["text"] for c in client.get("/api/memory/conclusions", headers=user("gj")).json()["conclusions"]}
    assert {
        "Gina is allergic to cats",
        "Jon works at St Mary's Hospital as a nurse",
        "Gina really enjoys painting landscapes",
        "Jon lives in Denver",
        "Jon's sister is Kate",
    } <= found
    assert not any("love that" in t or "User" in t for t in found)  # a reaction is no preference


def test_sentences_that_state_nothing_of_weight_give_no_statement() -> None:
    """Lines of the kind that filled profiles on long chats (issue 16) are no statement."""
    for sentence in (
        "It's been a great way to work through stuff I'm going through",
        "Since I was 17 or so",
        "I love that!",
        "I really like your idea",
        "Do you like sushi?",
        "Can you remind me about my class?",
        "I think I lost my job last week and it was hard",
    ):
        assert statements_of(sentence, "Caroline") == [], sentence
    assert statements_of("I love hiking in the mountains, it clears my head every time.", "Caroline") == [
        ("Caroline loves hiking in the mountains", "preference", 0.85)
    ]
