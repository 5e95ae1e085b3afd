"""Planted-bug checks of the code landed in ea8677e..c1e5c4d (issue 20, a3).

One-line bugs were planted one at a time in a private copy of the per-user lock, the Dreamer's merge,
the opted-out live sessions, the worker's heartbeat, the reindex's entity names and ``--check``, the
entity-name repair, the one-question save rule and recall's current-fact evidence; each test here
fails with one that passed the owners' tests (named in its docstring) and passes without it. Real
Redis, the HTTP app where a user would go, literals from the README and the docstrings.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.privacy_controls import OPT_OUT_CACHE_S
from agtos.memory.reindex import ReindexReport, reindex_user
from agtos.serving.app import create_app
from agtos.storage.user_lock import UserLock
from tests.helpers import end_session, gina_jon_turns, talk, user
from tests.redis_process import RedisProcess
from tests.test_dreamer import conclusions
from tests.test_dreamer_race import TEXT, _citing_newest, _end, _llm_app
from tests.test_entity_vector_repair import drop_entity
from tests.test_forget_pending_vectors import api, end_while_down, sweep  # noqa: F401 - api: a fixture
from tests.test_forget_races import HookedEmbedder
from tests.test_knowledge_updates import CITY, JOB, SALE, said_on
from tests.test_pending_vectors import ANA, LISBON, pending

WAIT_S = 30.0


def test_a_holder_whose_lock_expired_releases_nothing_of_the_next_holders(
    coordinator: MemoryCoordinator, settings: Settings, raw_redis: redis.Redis
) -> None:
    """Two holders of one user's lock (threads of one process): the first overran its ``lock_ms`` and
    the second took the lock; the first's release leaves the second's key (each holder has its own
    token: a token shared by a user's holders, ``token = user_id``, deleted it)."""
    services = coordinator.services
    lock = UserLock(services.connector, services.keys, "dreaming", lock_ms=300)
    key = f"{settings.key_prefix}:u:{{dora}}:dreaming:conclusions"
    second_in, first_out = threading.Event(), threading.Event()
    seen: list[bytes | str | None] = []

    def second() -> None:
        with lock.held("dora", "conclusions"):
            second_in.set()
            assert first_out.wait(WAIT_S)
            seen.append(raw_redis.get(key))

    with lock.held("dora", "conclusions"):
        time.sleep(0.4)  # past its 300 ms: the key expired
        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        assert second_in.wait(WAIT_S)
    first_out.set()
    thread.join(WAIT_S)
    assert len(seen) == 1 and seen[0] is not None, seen
    assert raw_redis.get(key) is None  # and the second released its own


def _reply_citing_turns(turns: list[int]) -> Any:
    """A consolidation reply citing the newest listed episode and its turns ``turns`` (in that order)."""

    def reply(body: dict[str, Any]) -> str:
        listing = body["messages"][-1]["content"]
        newest = next(line[2:].split(" ")[0] for line in listing.splitlines() if line.startswith("- "))
        found = {"text": "User plans trips by train", "type": "inductive", "confidence": 0.8}
        cited = {"source_episode_ids": [newest], "source_turn_ids": [f"{newest}.t{i}" for i in turns]}
        return json.dumps({"conclusions": [found | cited]})

    return reply


def test_a_conclusions_turns_are_ordered_by_position_as_numbers(settings: Settings) -> None:
    """A conclusion citing turns 10 and 2 of one episode lists them 2 then 10: the turn's position is a
    number (sorted as text, ``t10`` came before ``t2``; test_dreamer_race cites turn 0 only)."""
    lines = [f"Leg {i} of the trip goes by train through town number {i}." for i in range(12)]
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": line, "timestamp": 1_700_000_000_000 + i * 1000}
        for i, line in enumerate(lines)
    ]
    with _llm_app(settings) as (stub, coordinator, client):
        stub.queue_chat(_reply_citing_turns([10, 2]))
        ended = end_session(client, "tara", "trip", turns)
        assert ended["saved"] is True, ended
        assert coordinator.dreamer.wait(WAIT_S)
        episode = ended["episode"]["id"]
        found = next(
            c for c in conclusions(client, "tara", type="inductive") if c["text"] == "User plans trips by train"
        )
        assert found["source_turn_ids"] == [f"{episode}.t2", f"{episode}.t10"], found


def test_an_opted_out_session_begun_while_redis_is_down_outlives_the_outage(tmp_path: Path) -> None:
    """An opted-out user's live session lives in this process only ("working memory only, nothing
    written to Redis"). She forgot everything earlier; then Redis goes down and she starts a session:
    it is read and appended to while Redis is down (the forget-all mark cannot be read: not taken for
    forgotten), and once Redis is back (the mark still there) it is still hers: it began after the
    forget-all, by this host's clock (begun at 0, the mark was newer and the session was dropped).
    test_privacy_families covers the forget-all landing while the session lives."""
    server = RedisProcess(tmp_path / "redis", appendonly=True).start()
    settings = Settings(redis_url=server.url, key_prefix="landed", data_dir=tmp_path, redis_timeout_s=0.3)
    coordinator = MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("al")).status_code == 200
            assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("al")).status_code == 200
            server.stop()  # a clean shutdown: the opt-out and the forget-all mark are on disk
            first = {"turns": [{"role": "user", "content": "My locker code is zqalvv."}]}
            assert client.post("/api/memory/sessions/s1/turns", json=first, headers=user("al")).status_code == 200
            held = client.get("/api/memory/sessions/s1", headers=user("al"))
            assert held.status_code == 200 and "zqalvv" in held.text, held.text
            more = {"turns": [{"role": "user", "content": "And the gym opens at six."}]}
            assert client.post("/api/memory/sessions/s1/turns", json=more, headers=user("al")).status_code == 200
            server.start()
            time.sleep(OPT_OUT_CACHE_S + 0.1)  # the opt-out is read from Redis again
            held = client.get("/api/memory/sessions/s1", headers=user("al"))
            assert held.status_code == 200, held.text
            assert "zqalvv" in held.text and "gym opens at six" in held.text, held.text
    finally:
        coordinator.close()
        server.stop()


def test_a_journalled_session_of_a_user_who_opts_out_and_forgets_is_gone_from_every_process(
    settings: Settings,
) -> None:
    """ "al" talked through process B before opting out (her turns were journalled); she opts out and
    forgets everything through process A: B no longer answers her session (its journal is gone). The
    opted-out shortcut (this process's memory only) is for sessions never journalled: taking it for
    every opted-out session answered B's stale copy, her words, with 200 (test_privacy_families covers
    the never-journalled ones)."""
    first, second = MemoryCoordinator(settings), MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=first)) as a, TestClient(create_app(coordinator=second)) as b:
            said = {"turns": [{"role": "user", "content": "My locker code is zqalvv."}]}
            assert b.post("/api/memory/sessions/live/turns", json=said, headers=user("al")).status_code == 200
            assert "zqalvv" in b.get("/api/memory/sessions/live", headers=user("al")).text
            opt_out = {"opt_out": True, "forget_existing": True}
            assert a.put("/api/memory/privacy", json=opt_out, headers=user("al")).status_code == 200
            time.sleep(OPT_OUT_CACHE_S + 0.1)  # B's cached "not opted out" has expired
            held = b.get("/api/memory/sessions/live", headers=user("al"))
            assert held.status_code == 404 and "zqalvv" not in held.text, held.text
    finally:
        first.close()
        second.close()


def test_a_conclusion_forgotten_between_a_runs_look_and_its_merge_is_stored_with_its_vector(
    settings: Settings,
) -> None:
    """mon's run stored ``TEXT``; tue's run finds it again and sees its vector, then the user deletes it
    before tue's merge: the merge stores tue's version and embeds it there (its vector went since the
    look). Skipping that step (``if late`` inverted) lost the conclusion tue's run found (test_dreamer_race
    and test_dreamer_cost never forget one mid-run)."""
    with _llm_app(settings) as (stub, coordinator, client):
        stub.queue_chat(_citing_newest(), _citing_newest())
        mon = _end(client, "dora", "mon")
        assert coordinator.dreamer.wait(WAIT_S)
        stored = next(c for c in conclusions(client, "dora", type="inductive") if c["text"] == TEXT)
        assert stored["source_episode_ids"] == [mon]
        index = coordinator.services.conclusions.index.vectors
        looked = index.vectors
        deleted: list[int] = []

        def look_then_forget(user_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
            found = looked(user_id, ids)
            if stored["id"] in found and not deleted and threading.current_thread().name.startswith("dreamer-"):
                gone = client.delete(f"/api/memory/conclusions/{stored['id']}", headers=user("dora"))
                deleted.append(gone.status_code)
            return found

        index.vectors = look_then_forget  # type: ignore[method-assign]
        tue = _end(client, "dora", "tue")
        assert coordinator.dreamer.wait(WAIT_S)
        assert deleted == [200]
        again = [c for c in conclusions(client, "dora", type="inductive") if c["text"] == TEXT]
        assert [c["source_episode_ids"] for c in again] == [[tue]], again
        assert looked("dora", [stored["id"]]), "stored without its vector"


def renamed_while_down(client: TestClient, switch: HookedEmbedder) -> str:
    """The Lisbon session stored while the embedder is up, then its entity Lisbon renamed Lisboa while
    it is down: every record has its vector, that entity's name waits (noted). Its id."""
    talk(client, ANA, "lisbon", LISBON, ("assistant", "How lovely for her."))
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(ANA)).json()["entities"]
    lisbon = str(next(e["id"] for e in listed if e["name"] == "Lisbon"))
    switch.down = True
    renamed = client.put(f"/api/entities/{lisbon}", json={"name": "Lisboa"}, headers=user(ANA))
    assert renamed.status_code == 200, renamed.text
    switch.down = False
    assert pending(client) == 1
    return lisbon


def test_a_reindex_counts_an_entity_deleted_while_it_embeds_the_name_as_gone(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
) -> None:
    """Lisbon renamed Lisboa while the embedder was down (its name lacks a vector), then deleted inside
    the reindex's embedding call of that name: the round reports it gone meanwhile (``skipped``, the CLI's
    "N gone meanwhile"), not embedded (a2's row 63: ``skipped`` was never counted for entity names)."""
    client, switch, coordinator = api
    lisbon = renamed_while_down(client, switch)
    switch.hook = lambda: drop_entity(client, "DELETE /entities/{id}", lisbon)
    report = ReindexReport()
    assert reindex_user(coordinator.services, ANA, [], report) is True
    assert switch.hook is None  # the delete ran inside the reindex's call
    assert (report.embedded, report.skipped, report.error) == (0, 1, None), report
    assert pending(client) == 0


def test_a_reindex_stops_when_the_embedder_fails_on_entity_names(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
) -> None:
    """The embedder fails in the reindex's call for the entity names: the user's reindex is not done
    (False, the error named; ``reindex`` counts no user and stops), as for records (a2's planted
    ``continue``); going on past it counted the user reindexed and the CLI said so."""
    client, switch, coordinator = api
    renamed_while_down(client, switch)
    switch.hook = lambda: setattr(switch, "down", True)  # down from the next call on
    report = ReindexReport()
    assert reindex_user(coordinator.services, ANA, [], report) is False
    assert switch.hook is None and report.error == "embedder unavailable", report
    assert (report.embedded, report.skipped) == (0, 0)
    assert pending(client) == 1  # the name still waits


def test_a_merged_duplicate_stored_while_down_no_longer_waits_for_a_vector(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
) -> None:
    """Ana and Lisbon stored while the embedder was down (each name noted); Lisbon merged into Ana: the
    duplicate is gone, and so is its note (/health counts one less, the sweep fills the rest and finds
    none gone). Clearing only its vector left the note: counted waiting until a sweep skipped it."""
    client, switch, _ = api
    end_while_down(client, switch, "lisbon", LISBON)
    switch.down = False
    listed = client.get("/api/entities", params={"limit": 100}, headers=user(ANA)).json()["entities"]
    ids = {e["name"]: e["id"] for e in listed}
    waiting = pending(client)
    merged = client.post(f"/api/entities/{ids['Ana']}/merge", json={"duplicate_id": ids["Lisbon"]}, headers=user(ANA))
    assert merged.status_code == 200, merged.text
    assert pending(client) == waiting - 1
    assert sweep(client) == {"filled": waiting - 1, "gone": 0, "error": None}


@pytest.mark.parametrize(
    ("turns", "told"),
    [
        ([("user", "How many legs does a spider have?"), ("assistant", "8.")], "8"),  # one digit its only news
        (
            [
                ("user", "What time is it in Tokyo right now?"),
                ("assistant", "Sure!"),
                ("assistant", "It is 17:00 there, on a Tuesday."),
            ],
            "17:00",
        ),
    ],
    ids=["one digit", "one of two answers tells"],
)
def test_a_one_question_session_is_kept_when_any_answer_tells_something(
    client: TestClient, turns: list[tuple[str, str]], told: str
) -> None:
    """ "A number" is any digit ("8."; ``\\d\\d`` dropped it), and a lookup is skipped only when *every*
    answer says nothing ("Sure!" then the time: kept; ``not all`` skipped it). test_answered_questions
    has a four-digit year and one answer each."""
    body = talk(client, "asker", "s1", *turns)
    assert (body["saved"], body["reason"]) == (True, "question answered"), body
    found = client.get("/api/memory/search", params={"q": told}, headers=user("asker")).json()["results"]
    assert [h["sessionId"] for h in found] == ["s1"], found


def test_an_entity_forgotten_between_its_write_and_its_note_is_not_noted(
    api: tuple[TestClient, HookedEmbedder, MemoryCoordinator],  # noqa: F811
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """The Lisbon session ends while the embedder is down; its first new entity is forgotten (the
    entity tier's forget, which POST /forget runs) after its record was written and before its name
    was noted: no note names it (the note checks the record is stored, in the same atomic step), so
    nothing waits for a forgotten entity. Noting it unchecked (``stored=False``) left a note no delete
    would drop (test_entity_vector_repair forgets an entity only after its note)."""
    client, switch, coordinator = api
    entities = coordinator.services.entities
    set_vector = entities._set_vector
    forgotten: list[str] = []

    def forget_first(user_id: str, entity_id: str, vector: Any) -> None:
        set_vector(user_id, entity_id, vector)
        if vector is None and not forgotten:
            forgotten.append(entity_id)
            assert entities.forget(user_id, entity_id)

    entities._set_vector = forget_first  # type: ignore[method-assign]
    end_while_down(client, switch, "lisbon", LISBON)
    assert len(forgotten) == 1
    noted = cast(list[bytes], raw_redis.zrange(f"{key_prefix}:u:{{{ANA}}}:vectors:_pending", 0, -1))
    members = {m.decode() for m in noted}
    assert f"entity:{forgotten[0]}" not in members and any(m.startswith("entity:") for m in members), members


JON_JOB = [
    ("old", 0, "I work at Kelvin Labs as an analyst.", "Nice! Which trails in Madeira do you like?"),
    ("new", 30, "I left Kelvin Labs and started at Orchard Logistics.", "Congrats! What could we cook for six?"),
    ("desk", 40, "What plants would work on a desk at work?", "A snake plant or a pothos."),
]


def test_where_a_named_speaker_works_now_follows_that_speakers_facts(client: TestClient) -> None:
    """Gina and Jon talk (named turns); Jon changed jobs. "Where does Jon work now?" finds the session
    of Jon's change (the slot ``jon|works-at`` followed to its current fact), not the newer session
    full of "work": the speakers a question names are the subjects looked up (``["user"]`` only found
    nothing; test_knowledge_updates asks about the user alone)."""
    start = datetime(2024, 2, 1, 9, tzinfo=UTC)
    for session, day, jon, gina in JON_JOB:
        turns = gina_jon_turns(start + timedelta(days=day), [("Jon", jon), ("Gina", gina)])
        assert end_session(client, "gina", session, turns)["saved"] is True
    found = client.get("/api/memory/search", params={"q": "Where does Jon work now?", "limit": 1}, headers=user("gina"))
    assert found.status_code == 200, found.text
    assert [r["sessionId"] for r in found.json()["results"]] == ["new"], found.json()


EMPLOYER = [  # works-at alone (no role: "as an analyst" is a ``job`` claim, which "job" also names)
    ("old", 0, "I work at Kelvin Labs. What are the best trails in Madeira?", "Try the Pico Ruivo path."),
    JOB[1],
    ("hunt", 40, "My brother needs a new job now. Where should he look?", "Try the job boards in town."),
]
# newer than the sale and full of the question's words, without the car in it
DRIVE = [*SALE, ("trip", 70, "Should I drive to Porto now or wait for spring?", "Spring is nicer.")]


@pytest.mark.parametrize(
    ("sessions", "query", "session"),
    [
        (EMPLOYER, "Where is my job now?", "new"),
        (DRIVE, "What do I drive now?", "sold"),
        (CITY, "Which city am I in now?", "leeds"),
        (SALE, "Which car did I say I ended up with?", "sold"),  # "did", but how it turned out
    ],
    ids=["job", "drive", "city", "ended up"],
)
def test_a_question_about_now_by_one_attribute_word_finds_the_current_value(
    client: TestClient, sessions: list[tuple[str, int, str, str]], query: str, session: str
) -> None:
    """A question naming an attribute by one word of ``ATTRIBUTE_WORDS`` alone ("job" for works-at,
    "drive" for car, "city" for lives-in) finds the session of its current value ahead of a newer one
    full of its words, as "Where do I work now?" does; a "did" question asking how things turned out
    ("ended up") asks about now too. test_knowledge_updates' questions also say "work", "car", "live"
    and "end up": a word dropped from the table, or "ended up" from the outcome words, passed them.
    The session read in for the hit it replaces takes that hit's score (0 passed every other test)."""
    for name, day, user_said, reply in sessions:
        said_on(client, "asker", name, day, user_said, reply)
    found = client.get("/api/memory/search", params={"q": query, "limit": 1}, headers=user("asker"))
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert [r["sessionId"] for r in results] == [session], results
    assert results[0]["score"] > 0, results  # a session read in takes the score of the hit it replaces
