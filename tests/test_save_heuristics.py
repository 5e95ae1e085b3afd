"""The episodic save heuristics, table-tested on whole conversations."""

from __future__ import annotations

from collections.abc import Callable

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
        "coding task done, said by the agent in full",  # an Aider session (README: task completions saved)
        True,
        "task_outcome",
        conv(
            ("user", "Refactor the payment module to use the new gateway client."),
            ("assistant", "I have refactored the payment module; the calls now go through GatewayClient."),
        ),
    ),
    (
        "coding task done, the agent's own verb",
        True,
        "task_outcome",
        conv(("user", "Move the retry logic into its own helper."), ("assistant", "I've moved it into retry.py.")),
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
        conv(("user", "What time is it in Tokyo?"), ("assistant", "I'm not sure, sorry.")),
    ),
    (
        "one question answered with a value",
        True,
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


# -- conversations between two named people ---------------------------------------------
TWO_PEOPLE = [
    ("user", "Gina", "Hey Jon!"),
    ("assistant", "Jon", "Hey Gina! How are you?"),
    ("user", "Gina", "Not great. I lost my job at Door Dash last week. Thanks for asking though."),
    ("assistant", "Jon", "Oh no, sorry to hear that. I just opened my own dance studio in Denver."),
    ("user", "Gina", "That's amazing! I'm going to start my own clothing store."),
    ("assistant", "Jon", "honestly i think im going to the waterpark with my family today, have you been?"),
    ("user", "Gina", "Thanks! Good luck Jon."),
]
TWO_PEOPLE_FACTS = [  # relative dates resolved against the turn's time (Monday 8 May 2023)
    "Gina lost their job at Door Dash last week [= week of 1 May 2023]",
    "Jon just opened their own dance studio in Denver",
    "Gina is going to start their own clothing store",
    "Jon is going to the waterpark with their family today [= 8 May 2023]",
]
MAY_8_2023_NOON = 1_683_547_200_000


def by_name(rows: list[tuple[str, str, str]]) -> list[Turn]:
    return [Turn(role=role, name=name, content=content, timestamp=MAY_8_2023_NOON) for role, name, content in rows]


def by_prefix(rows: list[tuple[str, str, str]]) -> list[Turn]:
    """The LoCoMo shape the eval harness sends: speaker_a as user, speaker_b as assistant, 'Name: ' first."""
    return [Turn(role=role, content=f"{name}: {content}", timestamp=MAY_8_2023_NOON) for role, name, content in rows]


@pytest.mark.parametrize("form", [by_name, by_prefix], ids=["Turn.name", "prefix"])
def test_two_named_people_both_give_facts_in_their_names(form: Callable[..., list[Turn]]) -> None:
    turns = form(TWO_PEOPLE)
    found = extract(turns)
    assert found.facts == TWO_PEOPLE_FACTS
    assert found.corrections == [] and found.preferences == []
    decision = decide_save(turns, found)
    assert decision.save is True and decision.type == "conversation"


@pytest.mark.parametrize("form", [by_name, by_prefix], ids=["Turn.name", "prefix"])
def test_two_named_people_greeting_only_is_not_saved(form: Callable[..., list[Turn]]) -> None:
    turns = form(
        [("user", "Gina", "Hey Jon!"), ("assistant", "Jon", "Hi Gina, how are you?"), ("user", "Gina", "Good, thanks!")]
    )
    decision = decide_save(turns, extract(turns))
    assert decision.save is False and decision.reason == "greeting or small talk only"


def test_only_the_second_person_states_facts_and_the_session_is_saved() -> None:
    turns = by_name([("user", "Gina", "Hey, what's new?"), ("assistant", "Jon", "I adopted a beagle called Max.")])
    found = extract(turns)
    assert found.facts == ["Jon adopted a beagle called Max"]
    assert decide_save(turns, found).save is True


def test_an_unnamed_assistant_is_not_a_source_of_user_facts() -> None:
    turns = conv(("user", "I live in Lisbon."), ("assistant", "I am an AI assistant and I have no home."))
    assert extract(turns).facts == ["User lives in Lisbon"]


@pytest.mark.parametrize(
    ("sentence", "speaker", "other", "expected"),
    [
        ("I lost my job at Door Dash", "Gina", None, "Gina lost their job at Door Dash"),
        ("My sister is visiting me next week", "Gina", None, "Gina's sister is visiting them next week"),
        ("We moved to Denver in May", "Jon", None, "Jon and others moved to Denver in May"),
        ("I'll send you my recipe", "Gina", "Jon", "Gina will send Jon their recipe"),
        ("I recommend it if you haven't tried it", "Jon", "Gina", "Jon recommends it if Gina hasn't tried it"),
        ("When I was young, I lived in Rome", None, None, "When User was young, User lived in Rome"),
    ],
)
def test_third_person_names_the_speaker(sentence: str, speaker: str | None, other: str | None, expected: str) -> None:
    assert third_person(sentence, speaker, other) == expected
