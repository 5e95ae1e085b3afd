"""The extractive summary: attributed to speakers, content only, bounded, diverse, embedding-aware."""

from __future__ import annotations

import numpy as np
import pytest

from agtos.schemas import Turn
from agtos.tasks.summarize import ExtractiveSummariser, extractive_summary

TWO_PEOPLE = [
    ("user", "Gina", "Hey Jon!"),
    ("assistant", "Jon", "Hey Gina! How are you?"),
    ("user", "Gina", "Not great. I lost my job at Door Dash last week. Thanks for asking though."),
    ("assistant", "Jon", "Oh no, sorry to hear that. I just opened my own dance studio in Denver."),
    ("user", "Gina", "That's amazing! I'm going to start my own clothing store."),
    ("assistant", "Jon", "Good luck with that, Gina."),
    ("user", "Gina", "Thanks! Bye Jon."),
]


@pytest.mark.parametrize("named", [True, False], ids=["Turn.name", "prefix"])
def test_two_people_summary_names_them_and_keeps_only_content(named: bool) -> None:
    turns = [
        Turn(role=role, name=name, content=text) if named else Turn(role=role, content=f"{name}: {text}")
        for role, name, text in TWO_PEOPLE
    ]
    assert ExtractiveSummariser().summarise(turns) == (
        "Gina: I lost my job at Door Dash last week. Jon: I just opened my own dance studio in Denver. "
        "Gina: I'm going to start my own clothing store."
    )


def test_agent_chat_keeps_role_labels_and_a_one_off_label_stays_content() -> None:
    turns = [
        Turn(role="user", content="Hi!"),
        Turn(role="user", content="I prefer metric units in every answer."),
        Turn(role="assistant", content="Noted: metric units from now on."),
    ]
    assert (
        extractive_summary(turns)
        == "User: I prefer metric units in every answer. Assistant: Noted: metric units from now on."
    )


def test_greetings_only_summarise_to_nothing() -> None:
    turns = [Turn(role="user", name="Gina", content="Hey Jon!"), Turn(role="assistant", name="Jon", content="Hi Gina!")]
    assert extractive_summary(turns) == ""


def _long_chat() -> list[Turn]:
    topics = ["pottery", "sailing", "chess", "baking", "cycling", "painting", "climbing", "gardening"]
    turns = []
    for i, topic in enumerate(topics * 3):
        name = "Gina" if i % 2 == 0 else "Jon"
        turns.append(
            Turn(
                role="user" if name == "Gina" else "assistant",
                name=name,
                content=f"I spent day {i} on {topic} lessons near Boulder.",
            )
        )
    return turns


def test_summary_is_bounded_and_gives_both_people_a_line() -> None:
    summary = extractive_summary(_long_chat())
    assert 0 < len(summary) <= 600
    assert summary.startswith(("Gina: ", "Jon: ")) and "Gina: " in summary and "Jon: " in summary


def test_repeated_sentences_are_picked_once() -> None:
    repeated = "I adopted a beagle puppy called Max from the shelter."
    turns = [Turn(role="user", name="Gina", content=repeated) for _ in range(6)]
    turns += [
        Turn(role="assistant", name="Jon", content="I finished my nursing degree at Denver State."),
        Turn(role="user", name="Gina", content="My sister Ana moved to Lisbon for a design job."),
    ]
    summary = extractive_summary(turns)
    assert summary.count("beagle") == 1
    assert "nursing degree" in summary and "Lisbon" in summary


REQUEST = "Plan a weekend in Lisbon."
PALACES = "Sintra palaces open early, tickets cost twenty euros."
FADO = "Alfama hosts fado nights every Friday evening."
VECTORS = {REQUEST: [1.0, 0.0], PALACES: [0.0, 1.0], FADO: [1.0, 0.0]}  # the fado line is about the request


def _weekend() -> tuple[list[Turn], int]:
    turns = [Turn(role="user", content=REQUEST), Turn(role="assistant", content=f"{PALACES} {FADO}")]
    room = len(f"User: {REQUEST} ") + len(f"Assistant: {PALACES}") + 2  # one answer sentence fits, not two
    return turns, room


def test_sentence_embeddings_decide_what_is_central() -> None:
    turns, room = _weekend()
    lexical = extractive_summary(turns, max_chars=room)
    assert lexical == f"User: {REQUEST} Assistant: {PALACES}"  # more words, nothing shared
    embedded = extractive_summary(turns, embed=lambda texts: np.array([VECTORS[t] for t in texts]), max_chars=room)
    assert embedded == f"User: {REQUEST} Assistant: {FADO}"


def test_a_failing_embedder_falls_back_to_the_lexical_summary() -> None:
    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("embedder unavailable")

    turns, room = _weekend()
    assert ExtractiveSummariser(broken, max_chars=room).summarise(turns) == f"User: {REQUEST} Assistant: {PALACES}"


def test_a_short_personal_statement_is_content() -> None:
    turns = [Turn(role="user", content="I'm vegetarian."), Turn(role="assistant", content="Noted.")]
    assert extractive_summary(turns) == "User: I'm vegetarian."
