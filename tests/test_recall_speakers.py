"""The speakers' names in a question do not steer the search (issue 14).

In a chat between two named people the names are in nearly every question ("What is the name of
Jon's dog?") and in the greetings ("Night Gina!", "Jon!! It's been a few days"), which match the
names better than any turn matches the question's other words: the greetings crowd out the
evidence. The search leaves out of the query the names of the people who speak; other names stay.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory import recall
from agtos.memory.coordinator import MemoryCoordinator
from agtos.tasks.ranking import named_speakers, without_speakers
from tests.helpers import end_session, gina_jon_turns, isolated_app, user

USER = "gina-and-jon-pets"
START = datetime(2023, 3, 6, 19, 0, tzinfo=UTC)
SESSIONS = 8
EVIDENCE_SESSION = 5
EVIDENCE = "Our puppy Nacho chewed through my running shoes again, the little rascal."
SMALL_TALK = [
    ("Gina", "Jon!! It's been a few days"),
    ("Jon", "Gina! Good to hear from you."),
    ("Jon", "Hey Gina! Doing well, just got home from work."),
    ("Gina", "Traffic this morning was unreal, I was late again."),
    ("Jon", "There was an accident on the bridge I think."),
    ("Gina", "I'm thinking about getting a plant for my desk."),
    ("Jon", "Get a snake plant, they're impossible to kill."),
    ("Gina", "Gotta run, dinner's ready. Bye Jon!"),
    ("Jon", "Night Gina! Sleep well Gina!"),
]


@pytest.mark.parametrize(
    ("query", "names", "expected"),
    [
        ("What is the name of Jon's dog?", ["Jon", "Gina"], "What is the name of dog?"),
        ("What are the names of Gina's and Jon's pets?", ["Gina", "Jon"], "What are the names of and pets?"),
        ("Where did Gina’s sister move", ["gina"], "Where did sister move"),  # any case, curly apostrophe
        ("Will Jon's sister move?", ["Will", "Jon"], "sister move?"),  # written capitalised: a name
        ("Where will Jon's sister move?", ["Will", "Jon"], "Where will sister move?"),  # lower case: a word
        ("What did June do in June?", ["June", "Jon"], "What did June do in June?"),  # a month: kept
        ("When did Jonathan visit Jon?", ["Jon"], "When did Jonathan visit ?"),  # whole names only
        ("Which city does Maria live in?", ["Gina", "Jon"], "Which city does Maria live in?"),  # not a speaker
        ("Gina?", ["Gina"], "Gina?"),  # nothing else to search for: the query as it is
        ("Where does Mary Ann work?", ["Mary Ann", "Mary"], "Where does work?"),  # the longest name first
        ("Where does Ann Marie work?", ["ann", "Ann Marie"], "Where does work?"),  # longest first, whatever the case
        ("What is the name of Jon's dog?", [], "What is the name of Jon's dog?"),
        (":", ["\u0301", "Jon"], ":"),  # a name of one combining mark folds to nothing: not a name
        ("Where does Jon live?", [" \u0301 "], "Where does Jon live?"),
    ],
)
def test_without_speakers(query: str, names: list[str], expected: str) -> None:
    assert without_speakers(query, names) == expected


def test_named_speakers() -> None:
    names = ["gina", "Jon", "June", "Will"]
    assert named_speakers("What are Gina's and Jon’s pets, and will June come?", names) == {"gina", "jon"}
    assert named_speakers("Which plant did someone recommend?", names) == set()


def test_a_speaker_named_by_a_lone_combining_mark_leaves_recall_answering(
    chat: tuple[TestClient, MemoryCoordinator],
) -> None:
    """A turn's ``name`` is any string up to 128 characters: one combining accent (U+0301) folds to nothing,
    and its pattern matched the empty string, so every later query ending in punctuation answered 500."""
    client, _ = chat
    marked = {"X-User-Id": "combining-mark-speaker"}
    turns = [
        {"role": "user", "name": "\u0301", "content": "I live in Oslo now, near the harbour."},
        {"role": "assistant", "content": "Oslo is lovely in the summer."},
    ]
    assert client.post("/api/memory/sessions/mark/turns", json={"turns": turns}, headers=marked).status_code == 200
    assert client.post("/api/memory/sessions/mark/end", headers=marked).json()["saved"]
    searched = client.get("/api/memory/search", params={"q": "- Oslo"}, headers=marked)
    assert searched.status_code == 200, searched.text
    assert "Oslo" in searched.json()["results"][0]["highlights"][0]["text"]
    for route, body in (("/api/memory/ask", {"question": ":"}), ("/api/memory/context", {"query": ":"})):
        answered = client.post(route, json=body, headers=marked)
        assert answered.status_code == 200, (route, answered.text)


def session_turns(n: int) -> list[dict[str, Any]]:
    start = START + timedelta(days=4 * (n - 1))
    lines = SMALL_TALK[:4] + ([("Jon", EVIDENCE)] if n == EVIDENCE_SESSION else []) + SMALL_TALK[4:]
    return gina_jon_turns(start, lines)


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("speakers")) as (client, coordinator, _):
        for n in range(1, SESSIONS + 1):
            assert end_session(client, USER, f"day-{n:02d}", session_turns(n))["saved"]
        yield client, coordinator


def test_the_speakers_are_read_from_the_latest_sessions(chat: tuple[TestClient, MemoryCoordinator]) -> None:
    _, coordinator = chat
    assert recall.speaker_names(coordinator.services, USER) == {"Gina", "Jon"}
    assert recall.speaker_names(coordinator.services, "nobody-here") == set()


def test_a_question_naming_the_speakers_finds_the_evidence_not_the_greetings(
    chat: tuple[TestClient, MemoryCoordinator],
) -> None:
    client, _ = chat
    question = "What are the names of Gina's and Jon's pets?"
    hits = client.get("/api/memory/search", params={"q": question, "limit": 3}, headers=user(USER)).json()["results"]
    assert hits[0]["sessionId"] == f"day-{EVIDENCE_SESSION:02d}"
    assert hits[0]["highlights"][0]["text"] == EVIDENCE
    # a small context: the evidence comes before the greetings that say the names
    body = {"query": question, "token_budget": 120}
    section = client.post("/api/memory/context", json=body, headers=user(USER)).json()["context"]
    assert "Jon: " + EVIDENCE in section


def test_a_question_about_one_speaker_weighs_the_others_turns_less(
    chat: tuple[TestClient, MemoryCoordinator],
) -> None:
    """Both questions search the same words ("Which plant does recommend?"): each turn's relevance in
    the context is its search score, divided by 1.5 when someone else than the person asked about said it."""
    client, _ = chat
    relevance: dict[str, dict[str, float]] = {}
    for person in ("Jon", "Gina"):
        body = {"query": f"Which plant does {person} recommend?", "token_budget": 400}
        items = client.post("/api/memory/context", json=body, headers=user(USER)).json()["items"]
        relevance[person] = {i["text"]: i["relevance"] for i in items if i["tier"] == "turn"}
    gina = "Gina: I'm thinking about getting a plant for my desk."
    jon = "Jon: Get a snake plant, they're impossible to kill."
    assert relevance["Jon"][gina] == pytest.approx(relevance["Gina"][gina] / 1.5, abs=1e-3)
    assert relevance["Gina"][jon] == pytest.approx(relevance["Jon"][jon] / 1.5, abs=1e-3)


def test_the_query_embeds_once_while_the_speakers_are_those_last_read(
    chat: tuple[TestClient, MemoryCoordinator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query embeds during the version checks' round trip, without the names read for the user by
    the last search; names that changed since (here: a stale guess of Gina only) embed it again."""
    _, coordinator = chat
    rt = coordinator.services
    seen: list[str] = []
    embed_one = rt.semantic.embedder.embed_one
    monkeypatch.setattr(rt.semantic.embedder, "embed_one", lambda text: seen.append(text) or embed_one(text))
    monkeypatch.setattr(recall, "_LATEST", {})  # a process that has not searched for this user yet
    question = "What is the name of Jon's dog?"
    first = [(h.episode.id, h.score) for h in recall.search_episodes(rt, USER, question, 3)]
    assert seen == ["What is the name of dog?"]  # no guess: embedded once the names are read
    assert [(h.episode.id, h.score) for h in recall.search_episodes(rt, USER, question, 3)] == first
    assert seen == ["What is the name of dog?"] * 2  # early, once
    monkeypatch.setitem(recall._PEOPLE, ("stale",), (frozenset({"Gina"}), {}))
    recall._LATEST[USER] = ("stale",)
    assert [(h.episode.id, h.score) for h in recall.search_episodes(rt, USER, question, 3)] == first
    assert sorted(seen[2:]) == [question, "What is the name of dog?"]
    assert recall._LATEST[USER] == (USER, *recall._LATEST[USER][1:]) != ("stale",)


def test_a_speakers_name_is_read_also_written_without_its_accents() -> None:
    """'Zoe' and 'Nunez' name the speakers 'Zoë' and 'Ñúñez' (418bd29), read as their names as given;
    a name without accents stays as written."""
    names = ["Zoë", "Ñúñez", "Jon"]
    assert named_speakers("What does Zoe do, and where is Zoë's brother?", names) == {"zoë"}
    assert named_speakers("Did Nunez call Jon?", names) == {"ñúñez", "jon"}
    assert named_speakers("Did ÑÚÑEZ call?", names) == {"ñúñez"}
    assert without_speakers("What does Zoe do for work?", ["Zoë"]) == "What does do for work?"
    assert without_speakers("What does Zoë do for work?", ["Zoë"]) == "What does do for work?"
    assert without_speakers("Did Zoey call?", ["Zoë"]) == "Did Zoey call?"  # whole names only
    assert named_speakers("What did June do in May?", ["June", "May"]) == set()  # no name but months
