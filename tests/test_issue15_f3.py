"""Issue 15: the last race windows of a forget, and the journal caps at their boundary, over HTTP.

1. A forget (one episode, or everything) landing after ingestion's last check of its records
   (``run_ingestion``'s MGET, tests/test_forget_mid_ingest.py) and before the session end's own writes:
   the last-end record, the Dreamer's marker and the query-as-ingest stamp named the forgotten episode
   (or were keys of a user who forgot everything). The forget is sent through another API process
   right after ``run_ingestion`` returns, inline and in queue mode; every key of the user is read back.
2. A memory deleted between its write and its pending-vector note, or while its entities are fed:
   the note (and the user on the global list) or the entity records stayed, naming the deleted memory.
3. The journal caps at their boundary (the 1 MiB default to the byte), then the end, inline and through
   the queue: every acknowledged turn is in the episode, the refused one nowhere (no bug found).
4. A session id used again after a forget-all or an opt-out and opt-in: a new episode, nothing back
   (no bug found).
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
from tests.test_forget_mid_ingest import (  # noqa: F401 - other: a fixture
    GONE,
    GONE_WORD,
    KEPT,
    KEPT_WORD,
    forget_episode,
    hook_once,
    other,
    traces,
)
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


def end(client: TestClient, who: str, session: str, turns: list[dict[str, str]]) -> dict[str, Any]:
    """Append ``turns`` (if any) and end the session; the end's answer."""
    if turns:
        posted = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
        assert posted.status_code == 200, posted.text
    ended = client.post(f"/api/memory/sessions/{session}/end", headers=user(who))
    assert ended.status_code == 200, ended.text
    body: dict[str, Any] = ended.json()
    return body


def episodes(client: TestClient, who: str) -> list[dict[str, Any]]:
    listed = client.get("/api/memory/episodes", headers=user(who))
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["episodes"]
    return found


def set_opt_out(client: TestClient, who: str, opted_out: bool) -> None:
    body = {"opt_out": opted_out, "forget_existing": opted_out}
    response = client.put("/api/memory/privacy", json=body, headers=user(who))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("ended_first", [True, False], ids=["ended", "live"])
@pytest.mark.parametrize("how", ["forget-all", "opt-out and in"])
def test_a_session_id_used_again_after_forgetting_everything_is_a_new_episode(
    how: str,
    ended_first: bool,
    client: TestClient,
    coordinator: MemoryCoordinator,
    other: TestClient,  # noqa: F811 (the fixture imported above)
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Session 'gym' talked (ended, or still live in this API process), then everything forgotten
    through another process (forget-all, or opt-out with forget_existing then opt-in), then 'gym' used
    again with other turns and ended here. Bugs caught: the first turns coming back into the new
    episode (this process's working memory replayed, the journal not reset) or into any key, the new
    end answering the old episode (a last-end record left), or the new episode not stored."""
    if ended_first:
        assert end(client, "hal", "gym", GONE)["status"] == "done"
    else:
        posted = client.post("/api/memory/sessions/gym/turns", json={"turns": GONE}, headers=user("hal"))
        assert posted.status_code == 200, posted.text
    if how == "forget-all":
        forget_all(other, "hal")
    else:
        set_opt_out(other, "hal", True)
        set_opt_out(other, "hal", False)
    assert sorted(user_values(raw_redis, key_prefix, "hal")) == []
    posted = client.post("/api/memory/sessions/gym/turns", json={"turns": KEPT}, headers=user("hal"))
    assert posted.status_code == 200 and posted.json()["journalLength"] == len(KEPT), posted.text
    live = client.get("/api/memory/sessions/gym", headers=user("hal"))
    assert live.status_code == 200 and [m["content"] for m in live.json()["messages"]] == [t["content"] for t in KEPT]
    again = end(client, "hal", "gym", [])
    assert (again["status"], again["turnsAccepted"], again.get("lastEnd")) == ("done", len(KEPT), None), again
    [stored] = episodes(client, "hal")
    assert stored["id"] == again["episodeId"] and KEPT_WORD in stored["summary"]
    assert traces(raw_redis, key_prefix, "hal", GONE_NEEDLES) == []
    assert coordinator.dreamer.wait()


STAMP = 1_700_000_000_000  # every turn's time: the same digits in each journal entry


def journal_entries(raw: redis.Redis, prefix: str, who: str, session: str) -> list[bytes]:
    """The session's journal as Redis holds it (one JSON entry per turn)."""
    entries: list[bytes] = raw.lrange(f"{prefix}:u:{{{who}}}:session:{session}:turns", 0, -1)
    return entries


def append(client: TestClient, who: str, session: str, *contents: str) -> Any:
    turns = [{"role": "user", "content": c, "timestamp": STAMP} for c in contents]
    return client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))


def entry_overhead(client: TestClient, raw: redis.Redis, prefix: str, who: str) -> int:
    """The bytes of a journal entry besides its turn's ASCII content (one letter appended to a session
    'probe', its entry read back from Redis)."""
    probe = append(client, who, "probe", "x")
    assert probe.status_code == 200, probe.text
    return len(journal_entries(raw, prefix, who, "probe")[0]) - 1


def fill_to_the_byte(
    client: TestClient, raw: redis.Redis, prefix: str, who: str, cap: int, words: list[str], most: int
) -> int:
    """Append turns to session 'cap' (the i-th starting with ``words[i % len(words)]``, then letters, at
    most ``most`` characters) until its journal holds exactly ``cap`` bytes, each append acknowledged;
    returns how many. The last turn's length comes from the entries' own bytes, read back from Redis."""
    letters = "abcdefghij" * 10_000
    overhead = entry_overhead(client, raw, prefix, who)
    turns = 0
    while True:
        room = cap - sum(len(e) for e in journal_entries(raw, prefix, who, "cap")) - overhead
        text = f"{words[turns % len(words)]} {letters}"
        turns += 1
        if room <= most:
            appended = append(client, who, "cap", text[:room])
            assert appended.status_code == 200, appended.text
            break
        appended = append(client, who, "cap", text[: min(most, room - most // 2)])
        assert appended.status_code == 200, appended.text
    assert sum(len(e) for e in journal_entries(raw, prefix, who, "cap")) == cap
    return turns


def test_the_default_byte_cap_refuses_a_turn_one_byte_past_it(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """AGTOS_SESSION_MAX_BYTES at its default, 1 MiB (README): a session filled (HTTP appends of up
    to 90,000 characters) to one byte less than a one-letter turn's entry below 1,048,576 bytes; that
    turn would end one byte past the cap: a 413 naming it, nothing of it written. With the cap reached
    exactly taken (the tests below), a cap off by one either way fails. Bugs caught: a byte past the
    cap taken, another default, a refused append written or trimming older turns."""
    cap = 1_048_576
    held = cap - entry_overhead(client, raw_redis, key_prefix, "ivy")  # + a one-letter entry = cap + 1
    turns = fill_to_the_byte(client, raw_redis, key_prefix, "ivy", held, ["first"], 90_000)
    before = journal_entries(raw_redis, key_prefix, "ivy", "cap")
    refused = append(client, "ivy", "cap", "y")
    assert refused.status_code == 413, refused.text
    assert refused.json()["message"] == (
        f"session journal full: {held} bytes journalled, these turns would pass the cap of {cap} bytes per "
        "session (AGTOS_SESSION_MAX_BYTES); end the session (POST …/end) and continue in a new one"
    )
    assert journal_entries(raw_redis, key_prefix, "ivy", "cap") == before and len(before) == turns


def search_ids(client: TestClient, who: str, word: str) -> list[str]:
    found = client.get("/api/memory/search", params={"q": word, "mode": "bm25"}, headers=user(who))
    assert found.status_code == 200, found.text
    return [r["id"] for r in found.json()["results"]]


@pytest.mark.parametrize("mode", ["inline", "queue"])
@pytest.mark.parametrize("cap", ["bytes", "turns"])
def test_a_session_at_its_cap_ends_with_every_acknowledged_turn(
    cap: str, mode: str, settings: Settings, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A session filled to its cap exactly (AGTOS_SESSION_MAX_BYTES 6,000, or AGTOS_SESSION_MAX_TURNS 4),
    one more turn refused (413), then ended, inline or through the queue's worker. Bugs caught: a turn
    acknowledged and not in the episode (each turn's word found by search in it, turnsAccepted), the
    refused turn in it, the end failing at the cap (5xx), or the cap not freed once the session ended."""
    caps = {"session_max_bytes": 6_000} if cap == "bytes" else {"session_max_turns": 4}
    words = ["quillon", "zephyrine", "marmalux", "obsidiana"]
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode=mode, ingest_worker=False, **caps))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            if cap == "bytes":
                taken = fill_to_the_byte(client, raw_redis, key_prefix, "jo", 6_000, words, 2_000)
            else:
                taken = 4
                for word in words:
                    assert append(client, "jo", "cap", f"I keep the {word} notes in my desk.").status_code == 200
            assert append(client, "jo", "cap", "I also keep the vorpalith notes.").status_code == 413
            ended = client.post("/api/memory/sessions/cap/end", params={"wait": 0}, headers=user("jo"))
            assert ended.status_code == 200, ended.text
            body = ended.json()
            assert (body["status"], body["turnsAccepted"]) == ("done" if mode == "inline" else "queued", taken)
            if mode == "queue":
                assert coordinator.ingest_worker().drain() == 1
            assert [e["id"] for e in episodes(client, "jo")] == [body["episodeId"]]
            for word in words[:taken]:
                assert search_ids(client, "jo", word)[:1] == [body["episodeId"]], word
            assert search_ids(client, "jo", "vorpalith") == []
            assert journal_entries(raw_redis, key_prefix, "jo", "cap") == []
            assert append(client, "jo", "cap", "A new stretch of the session.").status_code == 200
    finally:
        coordinator.close()
