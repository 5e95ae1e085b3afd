"""Issue 15: the last race windows of a forget, and the journal caps at their boundary, over HTTP.

1. A forget (one episode, or everything) landing after ingestion's last check of its records
   (``run_ingestion``'s MGET, tests/test_forget_mid_ingest.py) and before the session end's own writes:
   the last-end record, the Dreamer's marker and the query-as-ingest stamp named the forgotten episode
   (or were keys of a user who forgot everything). The forget is sent through another API process
   right after ``run_ingestion`` returns, inline and in queue mode; every key of the user is read back.
2. A memory deleted between its write and its pending-vector note, or while its entities are fed:
   the note (and the user on the global list) or the entity records stayed, naming the deleted memory.
3. The journal caps at their boundary, then the end: every acknowledged turn is in the episode.
4. A session id used again after a forget-all or an opt-out and opt-in: a new episode, nothing back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory import ingest_worker
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.pending_vectors import PendingVectors
from tests.helpers import user
from tests.test_forget_mid_ingest import GONE, GONE_WORD, forget_episode, hook_once, other, traces  # noqa: F401
from tests.test_forget_pending_vectors import api, noted, sweep  # noqa: F401
from tests.test_forget_pending_vectors import traces as ana_traces
from tests.test_forget_races import HookedEmbedder
from tests.test_issue15_h15b import user_values
from tests.test_pending_vectors import ANA, LISBON, PARAPHRASE, pending

GONE_NEEDLES = (GONE_WORD, "8812", "Priya", "Leeds")
FORGOTTEN_WHILE_STORED = "the user forgot the episode while it was stored"  # README, h16's answer


def forget_all(client: TestClient, who: str) -> None:
    response = client.post("/api/memory/forget", json={"kind": "all"}, headers=user(who))
    assert response.status_code == 200, response.text


#: where the forget lands: after ``run_ingestion`` (its last check of the batch's records) or after
#: ``unmark_forgotten`` (the end's own re-check, after the stamp and the Dreamer's marker); and how the
#: forgotten episode's id is read from that call (its result, its arguments)
LANDINGS: dict[str, Callable[[Any, tuple[Any, ...]], list[str]]] = {
    "run_ingestion": lambda report, _: list(report.episode_ids),
    "unmark_forgotten": lambda _, args: [draft.episode.id for _, draft in args[1]],
}


def forgetting_after(monkeypatch: pytest.MonkeyPatch, landing: str, forget: Callable[[str], None]) -> list[str]:
    """``forget`` (with the first episode's id) runs once right after ``landing`` (:data:`LANDINGS`)
    returns in the ingestion worker's code. Returns the ids forgotten."""
    original, forgotten = getattr(ingest_worker, landing), []

    def then_forget(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        ids = LANDINGS[landing](result, args)
        if ids and not forgotten:
            forgotten.append(ids[0])
            forget(ids[0])
        return result

    monkeypatch.setattr(ingest_worker, landing, then_forget)
    return forgotten


def assert_nothing_left(raw: redis.Redis, prefix: str, who: str, kind: str, episode_id: str) -> None:
    """Forget-all: no key of ``who`` at all. One episode: no key names it or holds its words (an
    index's change log may name its id, by design)."""
    if kind == "all":
        assert sorted(user_values(raw, prefix, who)) == []
    else:
        assert traces(raw, prefix, who, (episode_id, *GONE_NEEDLES)) == []


@pytest.mark.parametrize("landing", list(LANDINGS))
@pytest.mark.parametrize("kind", ["episode", "all"])
def test_an_inline_end_forgotten_after_the_last_check_leaves_nothing(
    kind: str,
    landing: str,
    monkeypatch: pytest.MonkeyPatch,
    client: TestClient,
    coordinator: MemoryCoordinator,
    other: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Inline end; the forget lands after the run's last check, or after the end's re-check of its
    episode (before its last-end record). Bugs caught: the last-end record
    (``…:session:gym:ended``), the Dreamer's marker (``…:dreamed:<id>``) or the query-as-ingest stamp
    (``…:qai:gym``) written after it, naming the forgotten episode or left after forget-all; the end
    answering it stored ('done', its id) or a retried end naming it ('gone')."""
    forgotten = forgetting_after(
        monkeypatch,
        landing,
        lambda i: forget_episode(other, "fay", i) if kind == "episode" else forget_all(other, "fay"),
    )
    posted = client.post("/api/memory/sessions/gym/turns", json={"turns": GONE}, headers=user("fay"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/gym/end", headers=user("fay"))
    assert ended.status_code == 200, ended.text
    assert coordinator.dreamer.wait()
    [gone] = forgotten
    assert_nothing_left(raw_redis, key_prefix, "fay", kind, gone)
    body = ended.json()
    assert (body["status"], body["saved"], body.get("episodeId")) == ("skipped", False, None), body
    assert body["reason"] == FORGOTTEN_WHILE_STORED
    again = client.post("/api/memory/sessions/gym/end", headers=user("fay")).json()
    assert (again["reason"], again.get("lastEnd")) == ("session has no turns", None), again
    listed = client.get("/api/memory/episodes", headers=user("fay"))
    assert listed.status_code == 200 and listed.json()["episodes"] == []


@pytest.fixture
def queued(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    """Queue mode, no worker thread: the test drains the queue."""
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client, coordinator
    finally:
        coordinator.close()


@pytest.mark.parametrize("kind", ["episode", "all"])
def test_a_queued_end_forgotten_after_the_last_check_leaves_nothing(
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
    queued: tuple[TestClient, MemoryCoordinator],
    other: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Queue mode: the worker's run checked its records, then the forget lands. Bugs caught: the
    worker's query-as-ingest stamp or the Dreamer's marker written after it (naming the episode, or
    keys of a user who forgot everything)."""
    client, coordinator = queued
    forgotten = forgetting_after(
        monkeypatch,
        "run_ingestion",
        lambda i: forget_episode(other, "gil", i) if kind == "episode" else forget_all(other, "gil"),
    )
    posted = client.post("/api/memory/sessions/gym/turns", json={"turns": GONE}, headers=user("gil"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/gym/end", params={"wait": 0}, headers=user("gil"))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text
    assert coordinator.ingest_worker().drain() == 1
    assert coordinator.dreamer.wait()
    assert forgotten == [ended.json()["episodeId"]]
    assert_nothing_left(raw_redis, key_prefix, "gil", kind, forgotten[0])
    listed = client.get("/api/memory/episodes", headers=user("gil"))
    assert listed.status_code == 200 and listed.json()["episodes"] == []


def delete_memory(client: TestClient, memory_id: str) -> None:
    deleted = client.delete(f"/api/memory/memories/{memory_id}", headers=user(ANA))
    assert deleted.status_code == 200, deleted.text


def test_a_memory_deleted_before_its_pending_note_leaves_no_note(
    monkeypatch: pytest.MonkeyPatch,
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811 (the fixture imported above)
    other: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """POST /memories while the embedder is down; its DELETE (another process) lands after the
    record's write, before its pending-vector note. Bugs caught: the note written after the delete
    (the pending set naming the deleted id, /health counting it, Ana on the global list of users
    waiting), or the repair then giving it a vector (found by meaning)."""
    client, switch, _ = api
    switch.down = True
    original, deleted = PendingVectors.add_of_users, []

    def delete_first(self: PendingVectors, namespace: str, records: Any, *args: Any, **kwargs: Any) -> None:
        for _, record_id in records:
            deleted.append(record_id)
            delete_memory(other, record_id)
        original(self, namespace, records, *args, **kwargs)

    monkeypatch.setattr(PendingVectors, "add_of_users", delete_first)
    posted = client.post("/api/memory/memories", json={"text": LISBON[1]}, headers=user(ANA))
    assert posted.status_code == 201, posted.text
    assert deleted == [posted.json()["memory"]["id"]]
    assert noted(raw_redis, key_prefix) == set()
    assert pending(client) == 0
    assert raw_redis.smembers(f"{key_prefix}:meta:pending_vectors") == set()
    switch.down = False
    assert sweep(client) == {"filled": 0, "gone": 0, "error": None}
    found = client.get("/api/memory/memories", params={"q": PARAPHRASE}, headers=user(ANA))
    assert found.status_code == 200 and deleted[0] not in found.text
    assert ana_traces(raw_redis, key_prefix, set(deleted)) == []


def test_a_memory_deleted_while_its_entities_are_fed_leaves_none(
    coordinator: MemoryCoordinator,
    client: TestClient,
    other: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """POST /memories; its DELETE lands after the record's write, before its entities are fed. Bugs
    caught: the entity graph keeping records under the deleted memory's id ('Lisbon', only it said)."""
    ids: list[str] = []

    def delete_it(episodes: list[Any]) -> None:
        ids.append(episodes[0].id)
        delete_memory(other, episodes[0].id)

    hook_once(coordinator.services.entities, "ingest", True, delete_it)
    posted = client.post("/api/memory/memories", json={"text": LISBON[1]}, headers=user(ANA))
    assert posted.status_code == 201, posted.text
    assert ids == [posted.json()["memory"]["id"]]
    assert ana_traces(raw_redis, key_prefix, set(ids)) == []
    entities = client.get("/api/entities", headers=user(ANA))
    assert entities.status_code == 200 and "Lisbon" not in entities.text
