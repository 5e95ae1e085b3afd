"""Issue 16: the Dialectic answers in one or two sentences from the best evidence, cites evidence
ids that resolve, and says it does not know when nothing relevant is stored."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.tasks.answer_builder import NOT_KNOWN, build_answer
from agtos.tasks.dialectic import Evidence
from tests.helpers import user
from tests.test_dreamer_explicit import LISBON, end_session, exported_turns


def ask(client: TestClient, question: str, who: str = "maria") -> dict:
    response = client.post("/api/memory/ask", json={"question": question}, headers=user(who))
    assert response.status_code == 200, response.text
    return dict(response.json())


def sentence_count(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s])


def test_allergy_question_is_answered_briefly_from_the_turn_that_says_it(
    client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path
) -> None:
    episode = end_session(client, "maria", "lisbon", LISBON)
    body = ask(client, "What food allergies does the user have?")
    assert body["answered"] is True and body["source"] == "extractive"
    assert "peanut" in body["answer"].lower() and sentence_count(body["answer"]) <= 2
    assert "Portuguese" not in body["answer"] and "Feedzai" not in body["answer"]  # not a dump of everything
    said = exported_turns(coordinator, "maria", tmp_path)
    conclusions = {c.id for c in coordinator.list_conclusions("maria")}
    assert body["citedIds"] and set(body["citedIds"]) <= set(body["evidenceIds"])
    for cited in body["citedIds"]:  # each cited id is a stored turn, conclusion or the episode
        assert cited in said or cited in conclusions or cited == episode, cited
    work = ask(client, "Where does the user work?")
    assert work["answered"] is True and "Feedzai" in work["answer"] and sentence_count(work["answer"]) <= 2


def test_unrelated_question_abstains(client: TestClient) -> None:
    end_session(client, "maria", "lisbon", LISBON)
    for question in ("What is the user's favourite football team?", "Which programming language does the user use?"):
        body = ask(client, question)
        assert body["answered"] is False, body["answer"]
        assert body["answer"] == NOT_KNOWN and body["citedIds"] == []


def test_a_user_with_no_memories_abstains(client: TestClient) -> None:
    body = ask(client, "What food allergies does the user have?", who="nobody")
    assert (
        body["answered"] is False and body["answer"] == "I don't know: nothing I remember about the user answers that."
    )
    assert body["evidenceIds"] == []


def test_a_sentence_held_by_two_tiers_is_said_once_and_the_unrelated_is_left_out() -> None:
    evidence = [
        Evidence("con-1", "conclusion", "User prefers green tea.", 0.9),
        Evidence("mem-1", "memory", "User prefers green tea", 0.8),
        Evidence("ep-1", "episode", "User moved to Lisbon in May.", 0.5),
        Evidence("ep-1.t0", "turn", "User: Hi! I drink green tea every morning.", 0.4),
    ]
    answer = build_answer("What tea does the user prefer?", evidence)  # word overlap only (no embedder)
    assert (answer.text, answer.cited, answer.answered) == ("User prefers green tea.", ["con-1"], True)


def test_a_turn_is_said_in_the_third_person_and_weak_evidence_is_not_an_answer() -> None:
    turn = [Evidence("ep-1.t0", "turn", "User: Hi! Oh, and I am allergic to peanuts.", 0.3)]
    answer = build_answer("What is the user allergic to?", turn)
    assert (answer.text, answer.cited, answer.answered) == ("User is allergic to peanuts.", ["ep-1.t0"], True)
    unrelated = build_answer("Which football team does the user support?", turn)
    assert (unrelated.text, unrelated.cited, unrelated.answered) == (NOT_KNOWN, [], False)
