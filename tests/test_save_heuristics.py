"""The episodic save heuristics, table-tested on whole conversations."""

from __future__ import annotations

import pytest

from agtos.memory.episodic import build_episode
from agtos.schemas import Turn
from agtos.tasks.extract import extract, third_person
from agtos.tasks.importance import decide_save
from agtos.tasks.summarize import ExtractiveSummariser


def conv(*pairs: tuple[str, str]) -> list[Turn]:
    return [Turn(role=role, content=content) for role, content in pairs]


CASES = [
    (
        "correction",
        True,
        "correction",
        conv(
            ("user", "Book a table for Friday."),
            ("assistant", "Booked for Thursday."),
            ("user", "No, that's wrong, I said Friday."),
        ),
    ),
    (
        "preference",
        True,
        "preference",
        conv(("user", "I prefer metric units in every answer."), ("assistant", "Understood.")),
    ),
    (
        "preference-dislike",
        True,
        "preference",
        conv(("user", "I don't like spicy food, remember that."), ("assistant", "Noted.")),
    ),
    (
        "task completed",
        True,
        "task_outcome",
        conv(
            ("user", "Schedule a call with Sam at 3pm."),
            ("assistant", "Done, I've scheduled the call for 3pm."),
        ),
    ),
    (
        "coding task applied",
        True,
        "task_outcome",
        conv(("user", "Add a docstring to the login function."), ("tool", "Applied edit to app/auth.py")),
    ),
    (
        "greeting only",
        False,
        "conversation",
        conv(("user", "Hi!"), ("assistant", "Hello! How can I help?"), ("user", "thanks, bye")),
    ),
    (
        "single trivial lookup",
        False,
        "conversation",
        conv(("user", "What time is it in Tokyo?"), ("assistant", "It is 9pm in Tokyo.")),
    ),
    (
        "multi-turn discussion",
        True,
        "conversation",
        conv(
            ("user", "Compare the hiking trails near Zermatt."),
            ("assistant", "Here are three."),
            ("user", "Which one has the best view of the Matterhorn?"),
            ("assistant", "The Hornli trail."),
        ),
    ),
    (
        "single turn with a fact",
        True,
        "conversation",
        conv(("user", "I live in Lisbon with my two cats."), ("assistant", "Lovely city!")),
    ),
]


@pytest.mark.parametrize(("label", "saved", "kind", "turns"), CASES, ids=[c[0] for c in CASES])
def test_save_decision_table(label: str, saved: bool, kind: str, turns: list[Turn]) -> None:
    decision = decide_save(turns, extract(turns))
    assert decision.save is saved, decision.reason
    assert decision.type == kind
    assert 0.0 <= decision.importance <= 1.0


def test_corrections_and_preferences_rank_above_plain_talk() -> None:
    by_label = {c[0]: decide_save(c[3], extract(c[3])).importance for c in CASES}
    assert by_label["correction"] > by_label["multi-turn discussion"]
    assert by_label["preference"] > by_label["multi-turn discussion"]


def test_extraction_of_facts_keywords_topic() -> None:
    turns = conv(("user", "I'm vegetarian and I live in Berlin."), ("user", "Find a vegetarian restaurant for dinner."))
    found = extract(turns)
    assert "User is vegetarian and User lives in Berlin" not in found.facts
    assert any(f.startswith("User is vegetarian") for f in found.facts)
    assert found.topic == "food"
    assert "vegetarian" in found.keywords


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I prefer metric units.", "User prefers metric units"),
        ("I'm a night owl", "User is a night owl"),
        ("My favourite colour is green.", "User's favourite colour is green"),
        ("I don't like olives", "User does not like olives"),
        ("I have two dogs", "User has two dogs"),
        ("I moved to Porto last spring.", "User moved to Porto last spring"),
        ("I just started a new job", "User just started a new job"),
        ("I watch films on Fridays", "User watches films on Fridays"),
        ("I definitely prefer matte finishes", "User definitely prefers matte finishes"),
        ("We've moved to Porto", "User's household has moved to Porto"),
        ("I moved to Lisbon in May and I prefer tea", "User moved to Lisbon in May and prefers tea"),
        ("I'm tired but I am happy", "User is tired but is happy"),
        ("I work late so I often skip breakfast", "User works late so often skips breakfast"),
        ("I like cats and I don't like dogs", "User likes cats and does not like dogs"),
    ],
)
def test_third_person_rewrites(sentence: str, expected: str) -> None:
    assert third_person(sentence) == expected


def test_built_episode_has_deterministic_id_and_facts() -> None:
    turns = CASES[1][3]
    first = build_episode("u1", "sess", turns, ExtractiveSummariser())
    second = build_episode("u1", "sess", turns, ExtractiveSummariser())
    assert first.episode.id == second.episode.id
    assert first.episode.type == "preference"
    assert "User prefers metric units in every answer" in first.episode.facts
    assert build_episode("u2", "sess", turns, ExtractiveSummariser()).episode.id != first.episode.id
