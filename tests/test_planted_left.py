"""Planted bugs in recall, context assembly and episodes that the suite let through (issue 20, p4's
"Left" list in docs/testing.md, "Planted bugs in recall and context assembly"): each test here failed
with one of them planted and passes without it.

One app for the module; each test writes its own user's sessions, through ``POST
/api/memory/conversations`` (past sessions, each turn dated in its local time) or a live session's
``…/turns`` and ``…/end``, and reads through ``POST /api/memory/ask`` and ``POST /api/memory/context``.
Expected values are literals (scores: the weighted RRF of the ranks, worked out by hand).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import LLMSlot
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import delete_prefix, end_session, isolated_app, isolation_settings, user
from tests.stub_servers import StubModelServer


@pytest.fixture(scope="module")
def client(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("k1")) as (test_client, _, _):
        yield test_client


def session(sid: str, start: str, lines: list[tuple[str, str]]) -> dict[str, Any]:
    """Session ``sid`` of (speaker, text) lines a minute apart from ``start`` (ISO, with its UTC offset):
    Gina is the user, Jon the assistant."""
    first = datetime.fromisoformat(start)
    turns = [
        {
            "role": "user" if name == "Gina" else "assistant",
            "name": name,
            "content": text,
            "timestamp": (first + timedelta(minutes=i)).isoformat(),
        }
        for i, (name, text) in enumerate(lines)
    ]
    return {"id": sid, "turns": turns}


def ingest(client: TestClient, who: str, *sessions: dict[str, Any]) -> dict[str, str]:
    """The sessions as past conversations; their episode ids by session id."""
    response = client.post("/api/memory/conversations", json={"sessions": list(sessions)}, headers=user(who))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stored"] == len(sessions), body
    return {s["id"]: s["episodeId"] for s in body["sessions"]}


def ask(client: TestClient, who: str, question: str, limit: int = 5) -> list[dict[str, Any]]:
    response = client.post("/api/memory/ask", json={"question": question, "limit": limit}, headers=user(who))
    assert response.status_code == 200, response.text
    return list(response.json()["evidence"])


def context(client: TestClient, who: str, query: str, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memory/context", json={"query": query, **body}, headers=user(who))
    assert response.status_code == 200, response.text
    return dict(response.json())


PLUMBING = [
    ("Gina", "The plumber finally fixed the leaking pipe under the bathroom sink."),
    ("Jon", "Good, the cabinet floor was soaked for weeks."),
    ("Gina", "He replaced the rusty valve and the old washer too."),
    ("Jon", "Did he charge extra for the emergency call-out?"),
]
PICNIC = [
    ("Gina", "We had a picnic in the park by the old bandstand."),
    ("Jon", "Was the bandstand busy with the brass band again?"),
    ("Gina", "Only a few people, the weather was grey."),
    ("Jon", "Grey days are the quiet ones there."),
]
CHILI = [
    ("Gina", "I cooked a huge pot of chili with beans and smoked paprika."),
    ("Jon", "Chili with smoked paprika is the best kind."),
]
LIBRARY = [
    ("Gina", "The new library branch opened downtown with a huge children's section."),
    ("Jon", "The kids will love the reading corner there."),
    ("Gina", "They also have a small cafe by the entrance."),
    ("Jon", "Perfect for a Saturday morning visit."),
]


def kayaking(n: int) -> list[tuple[str, str]]:
    return [
        ("Gina", f"We went kayaking on lake number {n} at dawn and saw two herons."),
        ("Jon", f"Kayaking on lake {n} at dawn must have been cold on the water."),
        ("Gina", "Freezing, but the mist over the lake and the paddling were beautiful."),
        ("Jon", "Next time I will bring the thermos of tea for the kayak trip."),
    ]


def test_a_named_day_is_the_day_on_the_sessions_own_clock(client: TestClient) -> None:
    """r19, planted: the sessions of a named day picked by the UTC day of their turns. The chili was
    cooked on 30 April at 22:00 in California (1 May, 05:00 UTC): "on 01.05.2023" is the picnic's day
    there, and the picnic's first turn (the day's list: rank 1) goes first; planted, the chili turn
    was the day's too, and first in both lists."""
    episodes = ingest(
        client,
        "k1-r19",
        session("chili", "2023-04-30T22:00:00-07:00", CHILI),
        session("picnic", "2023-05-01T12:00:00-07:00", PICNIC),
        session("library", "2023-05-03T12:00:00-07:00", LIBRARY),
    )
    turns = [e for e in ask(client, "k1-r19", "What did Gina cook on 01.05.2023?", limit=1) if e["kind"] == "turn"]
    assert [(e["id"], e["text"]) for e in turns] == [
        (f"{episodes['picnic']}.t0", "Gina: We had a picnic in the park by the old bandstand.")
    ]


def test_on_equal_scores_the_turn_said_on_the_named_day_comes_first(client: TestClient) -> None:
    """r20, planted: the index's turn hits first in the fusion with the named day's turns. Both lists
    weigh 1: the plumbing session's first turn (5 June: the day's rank 1, not among the 5 index hits
    of the kayak trips) and the best kayaking turn (index rank 1, another day) both score 1/61, and the
    turn said that day wins the tie (recall's ``_with_dated``)."""
    episodes = ingest(
        client,
        "k1-r20",
        session("plumbing", "2023-06-05T12:00:00+00:00", PLUMBING),
        *(session(f"kayak-{n}", f"2023-06-{10 + n}T12:00:00+00:00", kayaking(n)) for n in range(1, 4)),
    )
    turns = [
        e for e in ask(client, "k1-r20", "Where did we go kayaking on 05.06.2023?", limit=1) if e["kind"] == "turn"
    ]
    assert [(e["id"], e["score"]) for e in turns] == [(f"{episodes['plumbing']}.t0", 0.5)]


def test_a_superseded_fact_counts_half_its_score_below_the_current_one(client: TestClient) -> None:
    """r30, planted: a superseded fact keeping its full score (``prefer_current``). London matches
    "live in London" best (rank 1 in both lists: 1.0), Berlin, which replaced it, comes second in
    both (2/62 of 2/61: 0.9839); London counts half (0.5) and goes below."""
    for text, valid_from in [("User lives in London", 1_704_700_800_000), ("User lives in Berlin", 1_710_489_600_000)]:
        posted = client.post(
            "/api/memory/memories", json={"text": text, "valid_from": valid_from}, headers=user("k1-r30")
        )
        assert posted.status_code == 201, posted.text
    evidence = ask(client, "k1-r30", "Does the user live in London?")
    assert [(e["text"], e["score"]) for e in evidence if e["kind"] == "memory"] == [
        ("User lives in Berlin", 0.9839),
        ("User lives in London", 0.5),
    ]


SUMMARIES = {  # what the summarising LLM (the stub) says of each session: words no turn says
    "chili": "Gina described her weekend dinner menu.",
    "library": "They discussed the new reading rooms downtown.",
    "kayak": "Gina recounted an early outdoor excursion.",
    "picnic": "They remembered a quiet afternoon outside.",
}


def summary_of(body: dict[str, Any]) -> str:
    said = body["messages"][-1]["content"]
    return next(text for word, text in SUMMARIES.items() if word in said.lower())


def test_a_context_holds_limit_session_summaries(redis_url: str, tmp_path: Path) -> None:
    """c09, planted: one episode summary fewer than ``limit``. Four sessions summarised by the LLM
    (the stub) in words no turn says (so no chosen turn line restates them), ``limit`` 2 and room for
    everything: the summaries of the two sessions the question is about."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    with StubModelServer() as stub:
        stub.chat_responder = summary_of
        slot = LLMSlot(provider="ollama", model="qwen3:4b", base_url=stub.url)
        settings = isolation_settings(redis_url, prefix, tmp_path).with_overrides(llm_slots={"summarize": slot})
        coordinator = MemoryCoordinator(settings)
        try:
            with TestClient(create_app(coordinator=coordinator)) as own:
                ingest(
                    own,
                    "k1-c09",
                    session("chili", "2023-05-01T12:00:00+00:00", CHILI),
                    session("library", "2023-05-03T12:00:00+00:00", LIBRARY),
                    session("kayak", "2023-05-04T12:00:00+00:00", kayaking(1)),
                    session("picnic", "2023-05-06T12:00:00+00:00", PICNIC),
                )
                items = context(own, "k1-c09", "weekend dinner menu reading rooms", limit=2, token_budget=4_000)[
                    "items"
                ]
        finally:
            coordinator.close()
            delete_prefix(redis_url, prefix)
    assert sorted(i["text"] for i in items if i["tier"] == "episodic") == [
        "Gina described her weekend dinner menu.",
        "They discussed the new reading rooms downtown.",
    ]


ZOO = " ".join(
    f"On visit {n} to the city zoo we watched the lions, the giraffes and the old elephant near the gate."
    for n in range(1, 15)
)
DOG = "Our golden retriever puppy chews every shoe in the house and sleeps on the sofa all afternoon."


def test_a_long_turns_context_line_is_cut_around_its_best_window(client: TestClient) -> None:
    """c10, planted: a long turn's line cut around the last of its matched windows. The turn (two
    embedder windows, both matched: the zoo's animals are like a pet too) shares no word with the
    question, so its line is the 200 tokens from its best window, the second, naming the puppy."""
    ingest(
        client,
        "k1-c10",
        session("zoo", "2023-05-10T12:00:00+00:00", [("Gina", f"{ZOO} {DOG}"), ("Jon", "What a month that was!")]),
        session("library", "2023-05-03T12:00:00+00:00", LIBRARY),
    )
    items = context(client, "k1-c10", "Which pet lives with them?")["items"]
    (line,) = [i["text"] for i in items if i["tier"] == "turn" and "city zoo" in i["text"]]
    assert line.startswith("Gina: …") and "Our golden retriever puppy chews every shoe" in line
    assert "On visit 1 to" not in line


def test_the_same_words_said_by_other_people_in_a_continued_session_are_an_episode_of_their_own(
    client: TestClient,
) -> None:
    """e03, planted: ``segment_key`` without the speaker's name. A live session ended, then continued
    with the same words said by two other people: a second stretch, a second episode (not the first
    one stored again)."""
    lines = ["Shall we meet at the station at nine?", "Nine works, see you on platform two."]

    def turns(names: tuple[str, str]) -> list[dict[str, Any]]:
        return [
            {"role": role, "name": name, "content": text}
            for role, name, text in zip(("user", "assistant"), names, lines, strict=True)
        ]

    first = end_session(client, "k1-e03", "call", turns(("Gina", "Jon")))
    second = end_session(client, "k1-e03", "call", turns(("Ann", "Bob")))
    assert first["saved"] and second["saved"], (first, second)
    assert first["episodeId"] != second["episodeId"]
    listed = client.get("/api/memory/episodes", headers=user("k1-e03")).json()["episodes"]
    assert sorted(e["id"] for e in listed) == sorted([first["episodeId"], second["episodeId"]])
