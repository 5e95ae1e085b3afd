"""Issues 15/20: forgetting one episode while the batch that stores it is being written leaves no trace.

The index step writes a batch's episode records first (``EpisodeStore.save_unless_opted_out``), then
their index entries, verbatim turns and facts, then the entity step their entities. A forget of one of
those episodes (``POST /api/memory/forget`` kind episode, acknowledged) landing in between deleted what
existed so far, and the run then wrote the rest for a record that was gone: index entries, turns, facts
and entities of a forgotten conversation, searchable and found by a SCAN. The forget is sent through
another API process (a second coordinator) from inside the run, so it lands exactly there; every key
of the user is read back (SCAN, by type) and searched through the API in every mode. Paths: a whole
conversation (POST /api/memory/conversations), a queued session end taken by the worker, an inline end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import user
from tests.needles import holds
from tests.test_issue15_h15b import user_values

# distinctive words (letters only, no stemmer shortens them) of the session forgotten and the one kept
GONE_WORD, KEPT_WORD = "zorblaxite", "quimbletonia"
GONE = [
    {"role": "user", "content": f"My locker code at the {GONE_WORD} gym in Leeds is 8812, please remember it."},
    {"role": "assistant", "content": f"Noted: locker code 8812 at the {GONE_WORD} gym in Leeds."},
    {"role": "user", "content": "I also prefer morning workouts with my trainer Priya Natarajan."},
    {"role": "assistant", "content": "Morning workouts with Priya, got it."},
]
KEPT = [
    {"role": "user", "content": f"I am learning to play the {KEPT_WORD} flute with my teacher Oscar Lindqvist."},
    {"role": "assistant", "content": f"Lovely, the {KEPT_WORD} flute with Oscar."},
    {"role": "user", "content": "I practise every evening in York before dinner."},
    {"role": "assistant", "content": "Evening practice in York, noted."},
]
MODES = ("hybrid", "vector", "bm25")


@pytest.fixture
def other(settings: Settings) -> Iterator[TestClient]:
    """A second API process over the same Redis (its own coordinator and caches)."""
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client
    coordinator.close()


def forget_episode(client: TestClient, who: str, episode_id: str) -> None:
    response = client.post("/api/memory/forget", json={"kind": "episode", "id": episode_id}, headers=user(who))
    assert response.status_code == 200, response.text


def episode_ids(client: TestClient, who: str) -> list[str]:
    listed = client.get("/api/memory/episodes", headers=user(who))
    assert listed.status_code == 200, listed.text
    return [e["id"] for e in listed.json()["episodes"]]


def recalled(client: TestClient, who: str, query: str) -> str:
    """Everything the API recalls for ``query`` (the query's echo left out): search in every mode, the
    memories matching it and the context built for it (their JSON, joined)."""
    answers = [client.get("/api/memory/search", params={"q": query, "mode": m}, headers=user(who)) for m in MODES]
    answers.append(client.get("/api/memory/memories", params={"q": query}, headers=user(who)))
    answers.append(client.post("/api/memory/context", json={"query": query}, headers=user(who)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return "\n".join(json.dumps({k: v for k, v in a.json().items() if k != "query"}) for a in answers)


def traces(raw: redis.Redis, prefix: str, who: str, needles: tuple[str, ...]) -> list[bytes]:
    """The keys of ``who`` whose name or contents hold any of ``needles``. An index's change log
    (``…:_idx:*:changes``, ids only) names a deleted document by design (so every process's mirror
    drops it, as after any forget): there the episode's id may stay, none of its words. A code such as
    "8812" counts as a whole number only (tests/needles.py: not inside a random id or a time)."""
    found = []
    for key, value in user_values(raw, prefix, who).items():
        logged = key.endswith(b":changes") and b":_idx:" in key
        if any(holds(key, n) or (holds(value, n) and not (logged and n.startswith("ep-"))) for n in needles):
            found.append(key)
    return found


def hook_once(target: Any, name: str, before: bool, action: Callable[[list[Any]], None]) -> None:
    """Wrap the bound method ``target.name`` so that ``action`` runs once (with its episodes argument),
    before or after the original."""
    original = getattr(target, name)
    pending = [action]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        episodes = next(a for a in args if isinstance(a, list))
        hook = pending.pop() if pending else None
        if hook is not None and before:
            hook(episodes)
        result = original(*args, **kwargs)
        if hook is not None and not before:
            hook(episodes)
        return result

    setattr(target, name, wrapped)


def test_an_episode_forgotten_after_its_record_was_written_leaves_nothing(
    client: TestClient, coordinator: MemoryCoordinator, other: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """POST /api/memory/conversations with two sessions; the forget of the first one's episode lands
    right after the batch's records were written. Bugs caught: the run writing the forgotten episode's
    index entries, turns or facts after the forget (SCAN, search), answering it stored, forgetting
    (or leaving out) the other session of the batch, or the forget answering 404 (the record it deleted
    not counted as found: its index entries were not written yet)."""
    forgotten: list[str] = []

    def forget_first(episodes: list[Any]) -> None:
        forgotten.append(episodes[0].id)
        forget_episode(other, "dana", episodes[0].id)

    hook_once(coordinator.services.episodes, "save_unless_opted_out", False, forget_first)
    sessions = [{"id": "gym", "turns": GONE}, {"id": "flute", "turns": KEPT}]
    response = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user("dana"))
    assert response.status_code == 200, response.text
    body = response.json()
    [gone] = forgotten
    assert traces(raw_redis, key_prefix, "dana", (gone, GONE_WORD, "8812", "Priya")) == []
    recall = recalled(client, "dana", f"{GONE_WORD} gym locker code 8812 Priya")
    assert [n for n in (gone, GONE_WORD, "8812", "Priya") if holds(recall, n)] == []
    kept = body["sessions"][1]["episodeId"]
    assert episode_ids(client, "dana") == [kept]
    assert [s["status"] for s in body["sessions"]] == ["skipped", "stored"]
    assert body["sessions"][0]["episodeId"] is None
    assert body["sessions"][0]["reason"] == "the user forgot the episode while it was stored"
    assert (body["stored"], body["skipped"]) == (1, 1)
    assert kept in recalled(client, "dana", f"{KEPT_WORD} flute Oscar")
    assert traces(raw_redis, key_prefix, "dana", (KEPT_WORD,)) != []


def test_a_queued_session_forgotten_before_its_entities_are_written_leaves_nothing(
    settings: Settings, other: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Queue mode: two session ends of one user taken by the worker in one batch; the forget of the
    first lands after the index step, before the entity step. Bugs caught: the entity graph naming the
    forgotten episode (Leeds, Priya Natarajan only said there), its sessionEnded event still emitted
    (the Dreamer would read it), or the other session not stored."""
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            ids: dict[str, str] = {}
            for session, turns in (("gym", GONE), ("flute", KEPT)):
                posted = client.post(
                    f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user("eli")
                )
                assert posted.is_success, posted.text
                ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user("eli"))
                assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text
                ids[session] = str(ended.json()["episodeId"])
            hook_once(coordinator.services.entities, "ingest", True, lambda _: forget_episode(other, "eli", ids["gym"]))
            events: list[dict[str, Any]] = []
            coordinator.services.events.subscribe("sessionEnded", events.append)
            assert coordinator.ingest_worker().drain() == 2
            assert traces(raw_redis, key_prefix, "eli", (ids["gym"], GONE_WORD, "8812", "Priya", "Leeds")) == []
            recall = recalled(client, "eli", f"{GONE_WORD} gym locker code 8812 Priya Leeds")
            assert [n for n in (ids["gym"], GONE_WORD, "8812", "Priya", "Leeds") if holds(recall, n)] == []
            assert [e.get("episode_id") for e in events] == [ids["flute"]]
            assert episode_ids(client, "eli") == [ids["flute"]]
            assert ids["flute"] in recalled(client, "eli", f"{KEPT_WORD} flute Oscar")
            assert traces(raw_redis, key_prefix, "eli", ("Lindqvist", "York")) != []
    finally:
        coordinator.close()


def test_an_inline_session_end_whose_episode_is_forgotten_meanwhile_records_no_episode(
    client: TestClient, coordinator: MemoryCoordinator, other: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Inline mode: the forget lands right after the end's episode record was written. Bugs caught: the
    end answering the episode saved ('done', its id) and its last-end record (what a retried end reads)
    naming the forgotten episode, or anything of it left (SCAN, search)."""
    forgotten: list[str] = []

    def forget(episodes: list[Any]) -> None:
        forgotten.append(episodes[0].id)
        forget_episode(other, "fay", episodes[0].id)

    hook_once(coordinator.services.episodes, "save_unless_opted_out", False, forget)
    posted = client.post("/api/memory/sessions/gym/turns", json={"turns": GONE}, headers=user("fay"))
    assert posted.is_success, posted.text
    ended = client.post("/api/memory/sessions/gym/end", headers=user("fay"))
    assert ended.status_code == 200, ended.text
    [gone] = forgotten
    assert traces(raw_redis, key_prefix, "fay", (gone, GONE_WORD, "8812", "Priya")) == []
    recall = recalled(client, "fay", f"{GONE_WORD} gym locker code 8812 Priya")
    assert [n for n in (gone, GONE_WORD, "8812", "Priya") if holds(recall, n)] == []
    assert episode_ids(client, "fay") == []
    body = ended.json()
    assert (body["status"], body.get("episodeId")) == ("skipped", None), body
    assert body["reason"] == "the user forgot the episode while it was stored"
