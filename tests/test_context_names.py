"""The context's budget on evidence, not on dates or names (issue 14).

Turn lines are dated once per day by a heading, not each by its own ``(8 May 2023)``; a question
may name a speaker by what the other calls them ("Hey Johnny!") rather than by the name the turns
carry (``Jon``), and a profile line is not relevant for only sharing a speaker's name with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory import recall
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Memory, Role, StoredTurn
from agtos.tasks.context import ContextItem, fit_budget, format_section
from agtos.tasks.tokens import count_tokens
from tests.helpers import end_session, gina_jon_turns, isolated_app, user

USER = "gina-and-jon-nicknames"
START = datetime(2023, 5, 1, 18, 0, tzinfo=UTC)
NOW_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
DAY_MS = 86_400_000
SMALL_TALK = [
    ("Gina", "Hey Johnny! How was your week?"),
    ("Jon", "Busy but fine, thanks Gigi. Work was a lot."),
    ("Gina", "Same here, so many meetings."),
    ("Jon", "Did you watch the game on Saturday?"),
    ("Gina", "No, I missed it. Talk soon, bye Johnny!"),
    ("Jon", "Night Gigi!"),
]
JON_BAKED = "I baked a lemon tart for the neighbours, it came out perfect."
GINA_BAKED = "I baked a loaf of banana bread on Sunday, my first one."


def turn(position: int, name: str, content: str, episode: str = "ep") -> StoredTurn:
    return StoredTurn(
        user_id="u",
        episode_id=episode,
        session_id="s",
        position=position,
        role=Role.user if name == "Gina" else Role.assistant,
        name=name,
        content=content,
        timestamp=NOW_MS,
    )


def test_the_names_the_speakers_call_each_other_are_theirs_too() -> None:
    talk = [turn(i, name, text) for i, (name, text) in enumerate(SMALL_TALK)]
    assert recall.addressed_names(talk) == {"Johnny": "Jon", "Gigi": "Gina"}
    assert recall.addressed_names(talk[:2]) == {}  # once each: not yet a name they go by
    places = [turn(0, "Gina", "Hey Houston, nice to meet you."), turn(1, "Jon", "Hi May! Thanks Gina.")] * 2
    # a name said once per turn but twice in all counts; a month is never a name; nor their own names
    assert recall.addressed_names(places) == {"Houston": "Jon"}
    three = [turn(0, "Gina", "Hey Johnny!"), turn(1, "Jon", "Hey Gigi!"), turn(2, "Ann", "Hey Johnny!")] * 2
    assert recall.addressed_names(three) == {}  # in a group chat it is not clear who is called


def test_turn_lines_pay_for_their_days_heading_once() -> None:
    day1 = [ContextItem("turn", f"e.t{i}", f"Gina: line {i}", 1.0, NOW_MS, "e", "s", i) for i in range(2)]
    day2 = ContextItem("turn", "f.t0", "Jon: later", 1.0, NOW_MS + DAY_MS, "f", "s2", 0)
    costs = [count_tokens(t) for t in ("### From past conversations", "14 November 2023:", "- Gina: line 0")]
    assert costs == [6, 5, 5]
    assert count_tokens("- Jon: later") == 4 and count_tokens("15 November 2023:") == 5
    header = 17  # "## Memory" and its instruction line (test_core_ranking)
    assert fit_budget([*day1, day2], 1_000) == ([*day1, day2], header + 6 + 5 + 5 + 5 + 5 + 4)  # 47
    # the second day's line (4) would fit in 8 more tokens, not with its day's heading (5)
    assert fit_budget([*day1, day2], header + 6 + 5 + 5 + 5 + 8) == (day1, header + 6 + 5 + 5 + 5)
    assert format_section([day2, *day1]).splitlines()[2:] == [
        "### From past conversations",
        "14 November 2023:",
        "- Gina: line 0",
        "- Gina: line 1",
        "15 November 2023:",
        "- Jon: later",
    ]


def session_turns(n: int) -> list[dict[str, Any]]:
    start = START + timedelta(days=3 * n)
    lines = SMALL_TALK[:3] + [("Jon", JON_BAKED)] * (n == 2) + [("Gina", GINA_BAKED)] * (n == 4) + SMALL_TALK[3:]
    return gina_jon_turns(start, lines)


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("names")) as (test_client, made, _):
        for n in range(1, 7):
            assert end_session(test_client, USER, f"evening-{n}", session_turns(n))["saved"]
        yield test_client, made


@pytest.fixture(scope="module")
def client(chat: tuple[TestClient, MemoryCoordinator]) -> TestClient:
    return chat[0]


@pytest.fixture(scope="module")
def coordinator(chat: tuple[TestClient, MemoryCoordinator]) -> MemoryCoordinator:
    return chat[1]


def context(client: TestClient, query: str, budget: int) -> dict[str, Any]:
    response = client.post("/api/memory/context", json={"query": query, "token_budget": budget}, headers=user(USER))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_question_naming_a_speaker_by_nickname_gets_that_speakers_turn_first(client: TestClient) -> None:
    turns = [i["text"] for i in context(client, "What did Johnny bake?", 60)["items"] if i["tier"] == "turn"]
    assert turns[:1] == [f"Jon: {JON_BAKED}"]  # not the greetings that say "Johnny", not Gina's bread
    turns = [i["text"] for i in context(client, "What did Gigi bake?", 60)["items"] if i["tier"] == "turn"]
    # said on Saturday 13 May 2023 (session 4): the Sunday before is 7 May
    assert turns[:1] == ["Gina: I baked a loaf of banana bread on Sunday [= 7 May 2023], my first one."]


def test_a_profile_line_sharing_only_a_speakers_name_is_not_relevant(client: TestClient) -> None:
    facts = {"facts": ["Jon likes sushi", "Jon's favourite band is Queen"]}
    assert client.put("/api/memory/profile", json=facts, headers=user(USER)).status_code == 200
    try:
        profile = [i["text"] for i in context(client, "What did Jon bake?", 2_000)["items"] if i["tier"] == "profile"]
        assert profile == []
        profile = [
            i["text"] for i in context(client, "What sushi does Jon like?", 2_000)["items"] if i["tier"] == "profile"
        ]
        assert profile == ["Jon likes sushi"]
    finally:
        client.put("/api/memory/profile", json={"facts": []}, headers=user(USER))


def test_a_question_about_one_speaker_gets_only_the_facts_that_name_them(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    facts = ["Jon bakes sourdough every Sunday", "Gina bakes cookies for her office", "Baking bread takes patience"]
    memories = [Memory(id=f"mem-bake-{n}", user_id=USER, text=text) for n, text in enumerate(facts)]
    coordinator.semantic.store_batch([], memories, coordinator.semantic.embedder.embed(facts))

    def derived(query: str) -> set[str]:
        return {i["text"] for i in context(client, query, 2_000)["items"] if i["tier"] == "semantic"}

    assert derived("What does Jon bake?") == {facts[0]}
    assert derived("What does Johnny bake?") == {facts[0]}  # by the name Gina calls him
    assert derived("What do Gina and Jon bake?") == set(facts[:2])
    assert derived("What do people bake?") == set(facts)  # no one named: every fact that matches


def test_the_names_are_read_again_when_a_session_ends(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """The names are kept per set of latest sessions; a new session's names are not missed."""
    who = f"{USER}-later"
    expected = [{"Johnny": "Jon"}, {"Johnny": "Jon", "Jonno": "Jon", "Gigi": "Gina"}]  # "Gigi" once a session
    for n, name in enumerate(("Johnny", "Jonno")):
        lines = [("Gina", f"Hey {name}! Long time."), ("Jon", "Hi Gigi!"), ("Gina", f"Bye {name}!"), ("Jon", "Bye!")]
        turns = [
            {
                "role": "user" if s == "Gina" else "assistant",
                "name": s,
                "content": text,
                "timestamp": NOW_MS + n * DAY_MS,
            }
            for s, text in lines
        ]
        posted = client.post(f"/api/memory/sessions/s{n}/turns", json={"turns": turns}, headers=user(who))
        assert posted.status_code == 200, posted.text
        assert client.post(f"/api/memory/sessions/s{n}/end", headers=user(who)).json()["saved"]
        assert recall.people(coordinator.services, who).aliases == expected[n]
