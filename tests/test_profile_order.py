"""Issue 14 (c3d): the profile's order, and so a context's "About the user" lines, must not depend on the
millisecond each conclusion of a Dreamer run was made in. Two users send the same sessions; the Dreamer's
clock (``agtos.tasks.consolidate.now_ms``, the stamp of each conclusion it makes) gives one of them a new
millisecond for every conclusion and the other one millisecond per run. Both must end with the same
profile and the same context, in the documented order: the latest run's conclusions first, then the more
confident, then the more recently said (``dreamer_pipeline.profile_order``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from agtos.memory import memory_crud, recall
from agtos.tasks import consolidate, distil
from tests.helpers import end_session, isolated_app, user

real_memory_id = distil.memory_id


def at(day: int, hour: int) -> int:
    return int(datetime(2026, 11, day, hour, 5, tzinfo=UTC).timestamp() * 1000)


#: two sessions, each stating preferences about tea in turns of their own (each 0.85 confident once said),
#: the first also where the user lives, then where the user lives now
SESSIONS = [
    (
        "first",
        at(20, 9),
        [
            ("user", "I live in Lisbon."),
            ("assistant", "A lovely city."),
            ("user", "I love mint tea."),
            ("assistant", "Mint tea is refreshing."),
            ("user", "I hate black tea."),
            ("assistant", "Noted."),
            ("user", "I love green tea."),
            ("assistant", "Green tea it is."),
            ("user", "Actually I live in Porto now."),  # one home: the later said (the same run, 0.9 both)
            ("assistant", "Porto, noted."),
        ],
    ),
    (
        "second",
        at(22, 18),
        [
            ("user", "I love oolong tea."),
            ("assistant", "Oolong is lovely."),
            ("user", "I love mint tea."),  # said again: more confident (0.87)
            ("assistant", "Still mint then."),
            ("user", "I hate chai tea."),
            ("assistant", "No chai, noted."),
        ],
    ),
]
#: after the second run (it re-reads both sessions, so all its conclusions are of that run): the one said
#: twice first, then the most recently said (session, then turn), the first session's last
EXPECTED = [
    "User loves mint tea",
    "User hates chai tea",
    "User loves oolong tea",
    "User loves green tea",
    "User hates black tea",
]
RUN_STAMPS = [at(20, 10), at(22, 19)]  # the Dreamer's clock at each session's end


class DreamerClock:
    """``now_ms`` for the consolidator: ``at`` during a run, one millisecond later for each conclusion
    when ``split`` (as on a busy machine), else the same millisecond for all."""

    def __init__(self, split: bool) -> None:
        self.split = split
        self.at = 0
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.at + (self.calls if self.split else 0)


def play(client: TestClient, who: str, clock: DreamerClock, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        patched.setattr(consolidate, "now_ms", clock)
        for (sid, start, turns), stamp in zip(SESSIONS, RUN_STAMPS, strict=True):
            clock.at, clock.calls = stamp, 0
            body = [{"role": r, "content": c, "timestamp": start + i * 60_000} for i, (r, c) in enumerate(turns)]
            assert end_session(client, who, sid, body)["saved"] is True
            assert clock.calls >= (3 if sid == "first" else 5)  # the patched clock stamped this run's conclusions


@pytest.fixture(scope="module")
def client(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with isolated_app(redis_url, tmp_path_factory.mktemp("c3d")) as (test_client, _, _):
        yield test_client


@pytest.fixture(scope="module")
def played(client: TestClient) -> dict[str, bool]:
    """``split`` (a millisecond per conclusion) and ``merged`` (one per run), each with its clock."""
    users = {"split": True, "merged": False}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for who, split in users.items():
            play(client, who, DreamerClock(split), monkeypatch)
    return users


def profile(client: TestClient, who: str) -> dict:
    response = client.get("/api/memory/profile", headers=user(who))
    assert response.status_code == 200, response.text
    return dict(response.json()["profile"])


def context(client: TestClient, who: str, query: str) -> str:
    body = {"query": query, "token_budget": 1_000}
    response = client.post("/api/memory/context", json=body, headers=user(who))
    assert response.status_code == 200, response.text
    return str(response.json()["context"])


def test_the_profile_order_is_the_documented_one_whatever_the_milliseconds(
    client: TestClient, played: dict[str, bool]
) -> None:
    for who in played:
        found = profile(client, who)
        assert found["preferences"] == EXPECTED, who
        assert "User lives in Porto" in found["facts"] and "User lives in Lisbon" not in found["facts"], who


def test_the_conclusions_of_one_run_share_its_time(client: TestClient, played: dict[str, bool]) -> None:
    for who in played:
        listed = client.get("/api/memory/conclusions", headers=user(who)).json()["conclusions"]
        assert {c["text"] for c in listed} >= set(EXPECTED), who
        stamps = {c["updated_at"] for c in listed}
        assert len(stamps) == 1 and RUN_STAMPS[1] <= stamps.pop() <= RUN_STAMPS[1] + 50, (who, listed)
        confidences = [c["confidence"] for c in listed]  # one time: the more confident first
        assert confidences == sorted(confidences, reverse=True) and len(set(confidences)) > 2, (who, listed)


def without_memories(client: TestClient, who: str) -> None:
    """Deletes the user's memories: here they state the same lines as the conclusions and would stand for
    them; without them (as in realtalk-dev's replay, where they say it otherwise) a profile line meets its
    conclusion, and the context shows it once, under "About the user" if it is among the profile's first."""
    listed = client.get("/api/memory/memories", params={"limit": 100}, headers=user(who)).json()["memories"]
    assert {m["text"] for m in listed} >= set(EXPECTED), listed
    for memory in listed:
        assert client.delete(f"/api/memory/memories/{memory['id']}", headers=user(who)).status_code == 200


def test_the_same_sessions_give_the_same_context(client: TestClient, played: dict[str, bool]) -> None:
    sections = {}
    for who in played:
        without_memories(client, who)
        text = context(client, who, "Which tea should I make?")
        sections[who] = text.split("### About the user\n", 1)[1].split("### From past conversations", 1)[0]
    assert sections["split"] == sections["merged"]
    about, conclusions = sections["split"].split("### Conclusions\n")
    # the profile's first lines sharing a word with the query ("tea"); the one of them that a conclusion
    # states too (oolong) is shown once, with its date, under "Conclusions"
    assert about.splitlines() == [f"- {line}" for line in EXPECTED[:2]], sections
    assert [line.split(") ", 1)[1] for line in conclusions.splitlines()] == EXPECTED[2:], sections


KEPT = ("kept-rising", "kept-falling")


def opposite_ids(user_id: str, text: str) -> str:
    """``distil.memory_id`` for the ``KEPT`` users: a function of the text alone, its digest for one and
    its complement for the other, so that their memories tie-break by id in opposite orders wherever
    ids break a tie (the real ids, a hash of user and text, order two users' memories differently too)."""
    if user_id not in KEPT:
        return real_memory_id(user_id, text)
    digest = int(hashlib.sha256(text.encode()).hexdigest()[:16], 16)
    return f"mem-{(digest if user_id == KEPT[0] else 2**64 - 1 - digest):016x}"


@pytest.fixture(scope="module")
def kept(client: TestClient) -> Iterator[tuple[str, str]]:
    """Two more users given the same sessions with the same Dreamer clock, their memories kept, their
    memory ids in opposite orders (:func:`opposite_ids`, while the module's tests run)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for module in (distil, recall, memory_crud):
            monkeypatch.setattr(module, "memory_id", opposite_ids)
        for who in KEPT:
            play(client, who, DreamerClock(False), monkeypatch)
        yield KEPT


def test_the_same_sessions_give_the_same_context_with_memories_kept(client: TestClient, kept: tuple[str, str]) -> None:
    """Issue 14 (c3e): the memories "User loves mint tea", "User loves green tea", … have the same BM25 score
    for "Which tea should I make?" (the same words as often in as long a text); ranked among themselves by
    their ids, two users given the same sessions got them in a different order (and so different
    "Relevant past sessions"). Tied hits share one rank in the RRF: both get the same context."""
    for who in kept:
        listed = client.get("/api/memory/memories", params={"limit": 100}, headers=user(who)).json()["memories"]
        assert {m["text"] for m in listed} >= set(EXPECTED), (who, listed)
        assert {m["id"] for m in listed} >= {opposite_ids(who, text) for text in EXPECTED}, (who, listed)
    texts = [context(client, who, "Which tea should I make?") for who in kept]
    assert texts[0] == texts[1]
    facts = texts[0].split("### Known facts and preferences\n", 1)[1].split("###", 1)[0]
    assert sorted(line.split(") ", 1)[1] for line in facts.splitlines()) == sorted(EXPECTED), texts[0]
