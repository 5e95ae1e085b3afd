"""Forget-all and opt-out, family by family, through the HTTP API (issue 20, helper a5).

``tests/test_forget_trace.py`` checks that a wiped user leaves no key of theirs and that every
other user's *own* keys stay byte-identical. Here the shared families are checked too: the
global keys that name several users (the index of live journals, the ingest queue and its error
hash, the user directory, the pending-vector list) must lose exactly the wiped user's entries,
for users whose ids are prefixes of each other; the same user id under another key prefix (a
second deployment on the same Redis) is untouched; ids holding a key separator or a glob
character are refused before they reach a key; and the keys of the later families carry the
lifetimes the module docs give them. Real Redis, the bundled ONNX embedder, literal expectations.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import MaintenanceConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage import ingest_queue
from tests import test_env_settings
from tests.helpers import delete_prefix, key_owner, talk, user
from tests.test_env_settings import Serve
from tests.test_readme_promises_auth import new_user_key

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

FAMILY = ("al", "alice", "al_x", "a@l")  # "al" is a prefix of the three others
DAY_S = 86_400


def queue_settings(settings: Settings, **overrides: Any) -> Settings:
    """Queue mode with no worker thread (the test drains it), no deferred background work."""
    return settings.with_overrides(
        ingest_mode="queue",
        ingest_worker=False,
        ingest_retry_delay_s=0.0,
        background_work_policy="always",
        maintenance=MaintenanceConfig(guard_retries=0, guard_delay_s=0.0),
        **overrides,
    )


@pytest.fixture
def queued(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    coordinator = MemoryCoordinator(queue_settings(settings))
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client, coordinator
    coordinator.close()


def words(who: str) -> str:
    """A user's own sentence (a distinctive word per user: letters only)."""
    return f"Remember that my locker code word is zq{''.join(c for c in who if c.isalpha())}vv and I live in Leeds."


def live_turn(client: TestClient, who: str, session: str = "live") -> None:
    body = {"turns": [{"role": "user", "content": words(who)}]}
    response = client.post(f"/api/memory/sessions/{session}/turns", json=body, headers=user(who))
    assert response.status_code == 200, response.text


def queue_end(client: TestClient, who: str, session: str = "q1") -> None:
    live_turn(client, who, session)
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200 and ended.json()["status"] == "queued", ended.text


def state(raw: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key under ``prefix``: per-user keys by DUMP, and the shared families item by item, each
    item tagged with the user it belongs to."""
    owned: dict[str, bytes | None] = {}
    shared: dict[str, dict[str, Any]] = {}
    for raw_key in raw.scan_iter(match=f"{prefix}:*", count=1_000):
        key = raw_key.decode()
        if key_owner(prefix, key) is not None:
            owned[key] = raw.dump(key)
            continue
        kind = raw.type(key).decode()
        if kind == "zset":
            shared[key] = {m.decode(): s for m, s in raw.zrange(key, 0, -1, withscores=True)}
        elif kind == "set":
            shared[key] = {m.decode(): True for m in raw.smembers(key)}
        elif kind == "stream":
            shared[key] = {i.decode(): f for i, f in raw.xrange(key)}
        elif kind == "hash":
            shared[key] = {f.decode(): v for f, v in raw.hgetall(key).items()}
        else:
            shared[key] = {"": raw.dump(key)}
    return {"owned": owned, "shared": shared}


def entry_user(key: str, item: str, value: Any) -> str | None:
    """The user one item of a shared key belongs to (None: nobody's)."""
    if key.endswith(":meta:journals:live"):
        return item.split(":", 1)[0]  # "user:session"
    if key.endswith((":meta:users", ":users", ":meta:pending_vectors", ":meta:privacy:opt-out")):
        return item
    if key.endswith((":meta:ingest-queue", ":meta:ingest-dead")):
        return str(json.loads(value[b"job"])["user_id"]) if b"job" in value else None
    return None


def without(snapshot: dict[str, Any], prefix: str, gone: str) -> dict[str, Any]:
    """``snapshot`` less every key and shared item of ``gone`` (a queue entry's error goes with its entry)."""
    owned = {k: v for k, v in snapshot["owned"].items() if key_owner(prefix, k) != gone}
    shared = {
        key: {i: v for i, v in items.items() if entry_user(key, i, v) != gone}
        for key, items in snapshot["shared"].items()
    }
    queue = snapshot["shared"].get(f"{prefix}:meta:ingest-queue", {})
    theirs = {i for i, v in queue.items() if entry_user(f"{prefix}:meta:ingest-queue", i, v) == gone}
    errors = shared.get(f"{prefix}:meta:ingest-errors", {})
    for entry in theirs & set(errors):
        del errors[entry]
    return {"owned": owned, "shared": {k: v for k, v in shared.items() if v}}


def hits(client: TestClient, who: str) -> list[str]:
    response = client.get("/api/memory/search", params={"q": words(who), "mode": "bm25"}, headers=user(who))
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


def fill(client: TestClient, coordinator: MemoryCoordinator, users: tuple[str, ...]) -> None:
    """Per user: a stored episode (a queued end the worker ran), a queued end and a live journal."""
    for who in users:
        queue_end(client, who, "s0")
    assert coordinator.ingest_worker().drain() == len(users)
    for who in users:
        assert len(hits(client, who)) == 1, who
        queue_end(client, who, "q1")
        live_turn(client, who)


def test_forget_all_and_opt_out_take_exactly_the_users_entries_from_every_shared_family(
    queued: tuple[TestClient, MemoryCoordinator], raw_redis: redis.Redis, key_prefix: str
) -> None:
    """ "al" forgets everything, then "alice" opts out (keeping what is stored): each loses their
    keys / their index entries and queued ends, and nothing else under the prefix changes."""
    client, coordinator = queued
    fill(client, coordinator, FAMILY)
    gate = coordinator.services.query_ingest
    saved = gate.mark_interaction_saved

    def broken(user_id: str, session_id: str) -> None:
        raise RuntimeError(f"could not stamp {user_id}/{session_id}")

    gate.mark_interaction_saved = broken  # type: ignore[method-assign]
    assert coordinator.ingest_worker().run_once(block=False) == 4  # each queued end fails once: retried later
    gate.mark_interaction_saved = saved  # type: ignore[method-assign]
    before = state(raw_redis, key_prefix)
    assert len(before["shared"][f"{key_prefix}:meta:ingest-errors"]) == 4
    live = before["shared"][f"{key_prefix}:meta:journals:live"]
    assert sorted(live) == ["a@l:live", "al:live", "al_x:live", "alice:live"]
    assert len(before["shared"][f"{key_prefix}:meta:ingest-queue"]) == 4

    forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("al"))
    assert forgot.status_code == 200 and forgot.json()["keysDeleted"] > 0, forgot.text
    after = state(raw_redis, key_prefix)
    fences = after["shared"].pop(f"{key_prefix}:meta:forget_fences")
    assert len(fences) == 1 and "al" not in fences  # a digest of the id, not the id
    assert after == without(before, key_prefix, "al")

    opted = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("alice"))
    assert opted.status_code == 200 and opted.json()["keysDeleted"] == 0, opted.text
    then = state(raw_redis, key_prefix)
    then["shared"].pop(f"{key_prefix}:meta:forget_fences")
    assert then["shared"].pop(f"{key_prefix}:meta:privacy:opt-out") == {"alice": True}
    live_key = f"{key_prefix}:meta:journals:live"
    expected = {"owned": after["owned"], "shared": dict(after["shared"])}  # what she stored stays
    expected["shared"][live_key] = {m: t for m, t in after["shared"][live_key].items() if not m.startswith("alice:")}
    assert then == expected  # only her live journal left the index: the idle sweep ends it no more

    assert coordinator.ingest_worker().drain() == 3  # al's queued end left with her
    # the failed attempts stored their episodes (the stamp fails after): each but al finds both
    assert [len(hits(client, who)) for who in FAMILY] == [0, 2, 2, 2]


def test_a_forget_all_walks_every_page_of_the_queue(
    queued: tuple[TestClient, MemoryCoordinator],
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forget reads the queue a page at a time (500 entries; 2 here): "al"'s ends queued behind
    two full pages of others' ends leave the queue, and only they."""
    monkeypatch.setattr(ingest_queue, "DROP_PAGE", 2)
    client, _ = queued
    for n, who in enumerate(("alice", "al_x", "a@l", "alice", "al", "al_x", "al")):
        queue_end(client, who, f"q{n}")
    stream = f"{key_prefix}:meta:ingest-queue"
    before = state(raw_redis, key_prefix)["shared"][stream]
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("al")).status_code == 200
    left = state(raw_redis, key_prefix)["shared"][stream]
    assert sorted(str(entry_user(stream, i, v)) for i, v in left.items()) == ["a@l", "al_x", "al_x", "alice", "alice"]
    assert left == {i: v for i, v in before.items() if entry_user(stream, i, v) != "al"}


@pytest.fixture
def other_prefix(redis_url: str, key_prefix: str) -> Iterator[str]:
    """A second deployment's prefix on the same Redis (deleted after the test)."""
    prefix = f"{key_prefix}-b"
    yield prefix
    delete_prefix(redis_url, prefix)


def test_a_forget_all_spares_the_same_user_id_under_another_prefix(
    queued: tuple[TestClient, MemoryCoordinator],
    settings: Settings,
    other_prefix: str,
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Two deployments share one Redis under two prefixes (the second extends the first): "al" of
    the first forgets everything; every key of the second, its "al" included, stays byte-identical."""
    client, coordinator = queued
    second = MemoryCoordinator(queue_settings(settings, key_prefix=other_prefix))
    try:
        with TestClient(create_app(coordinator=second)) as other:
            fill(client, coordinator, ("al", "alice"))
            fill(other, second, ("al", "alice"))
            kept = state(raw_redis, other_prefix)
            assert {key_owner(other_prefix, k) for k in kept["owned"]} == {"al", "alice"}
            forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("al"))
            assert forgot.status_code == 200, forgot.text
            assert state(raw_redis, other_prefix) == kept
            assert not [k for k in state(raw_redis, key_prefix)["owned"] if key_owner(key_prefix, k) == "al"]
            assert second.ingest_worker().drain() == 2  # both queued ends of the second deployment
            assert [len(hits(other, who)) for who in ("al", "alice")] == [2, 2]
    finally:
        second.close()


BAD_IDS = ("al:ice", "{al}", "al}", "al*", "a?", "a[l]", "al ice", "al\\")


@pytest.mark.parametrize("bad", BAD_IDS)
def test_an_id_with_a_separator_or_glob_character_is_refused_before_any_key(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str, bad: str
) -> None:
    """Such an id would widen a SCAN pattern ("al*" matches "alice") or change a key's shape: forget,
    opt-out and writes refuse it with 400 and every key stays as it was."""
    for who in ("al", "alice"):
        talk(client, who, "s1", ("user", words(who)))
    before = state(raw_redis, key_prefix)
    headers = {"X-User-Id": bad}
    turns = {"turns": [{"role": "user", "content": "hi"}]}
    calls = [
        client.post("/api/memory/forget", json={"kind": "all"}, headers=headers),
        client.put("/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=headers),
        client.post("/api/memory/sessions/s1/turns", json=turns, headers=headers),
        client.get("/api/memory/search", params={"q": "locker"}, headers=headers),
    ]
    assert [c.status_code for c in calls] == [400, 400, 400, 400], [c.text for c in calls]
    assert state(raw_redis, key_prefix) == before
    assert [len(hits(client, who)) for who in ("al", "alice")] == [1, 1]


JOURNAL_TTL_S = 48 * 3_600  # AGTOS_SESSION_JOURNAL_TTL_HOURS's default, 48 h
LIFETIMES = {  # the families that expire by themselves, by key part: their documented lifetime in seconds
    ":session:live:turns": JOURNAL_TTL_S,
    ":journals:live": JOURNAL_TTL_S,
    ":journals:turns": JOURNAL_TTL_S,
    ":journals:bytes": JOURNAL_TTL_S,
    ":journal-idem:": JOURNAL_TTL_S,  # an Idempotency-Key's mark lives as long as its journal
    ":session:s1:ended": JOURNAL_TTL_S,  # a retried end's answer, as long as a journal
    ":qai:": JOURNAL_TTL_S,  # the query-as-ingest gate of a session
    ":dreamed:": 7 * DAY_S,  # the Dreamer's run-once marker (agtos/storage/dream_markers.py)
}


def test_the_families_that_expire_carry_their_lifetime(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A live journal (with an Idempotency-Key), an ended session the Dreamer consolidated and an
    ingested response: each such key of the user expires after its family's lifetime (a minute's slack)."""
    body = {"turns": [{"role": "user", "content": words("al")}]}
    headers = {**user("al"), "Idempotency-Key": "k-1"}
    assert client.post("/api/memory/sessions/live/turns", json=body, headers=headers).status_code == 200
    ended = talk(client, "al", "s1", ("user", "Remember that I prefer green tea. I work at Globex in Lisbon."))
    assert ended["saved"], ended
    answer = "First I searched, then I compared, and in summary the green one wins. " * 30
    response = {"session_id": "qa", "query": "which?", "response": answer, "tool_calls": 2}
    ingested = client.post("/api/memory/responses", json=response, headers=user("al"))
    assert ingested.status_code == 200 and ingested.json()["ingest"], ingested.text
    ttls: dict[str, list[int]] = {}
    for raw_key in raw_redis.scan_iter(match=f"{key_prefix}:u:{{al}}:*", count=1_000):
        key = raw_key.decode()
        for part in LIFETIMES:
            if part in key:
                ttls.setdefault(part, []).append(int(raw_redis.ttl(key)))
    assert sorted(ttls) == sorted(LIFETIMES)
    for part, found in ttls.items():
        assert all(LIFETIMES[part] - 60 <= ttl <= LIFETIMES[part] for ttl in found), (part, found)


def test_a_forget_all_through_one_process_reaches_an_opted_out_session_held_by_another(settings: Settings) -> None:
    """Two API processes on one Redis: "al" opted out, so her live sessions live in the working memory
    of the process she talks to only (nothing is journalled). Her forget-all through the other
    process leaves them unreadable there too (a turn sent to one starts it anew); "alice"'s session
    in the same process stays."""
    first, second = MemoryCoordinator(settings), MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=first)) as a, TestClient(create_app(coordinator=second)) as b:
            assert a.put("/api/memory/privacy", json={"opt_out": True}, headers=user("al")).status_code == 200
            for who, session in (("al", "live"), ("al", "other"), ("alice", "live")):
                live_turn(b, who, session)
                assert words(who) in b.get(f"/api/memory/sessions/{session}", headers=user(who)).text
            assert a.post("/api/memory/forget", json={"kind": "all"}, headers=user("al")).status_code == 200
            assert b.get("/api/memory/sessions/other", headers=user("al")).status_code == 404
            query = {"query": "locker", "session_id": "other"}
            context = b.post("/api/memory/context", json=query, headers=user("al"))
            assert context.status_code == 200 and "zqalvv" not in context.text
            again = {"turns": [{"role": "user", "content": "A new start."}]}  # sent before any read there
            assert b.post("/api/memory/sessions/live/turns", json=again, headers=user("al")).status_code == 200
            held = b.get("/api/memory/sessions/live", headers=user("al"))
            assert "A new start." in held.text and "zqalvv" not in held.text
            assert words("alice") in b.get("/api/memory/sessions/live", headers=user("alice")).text
    finally:
        first.close()
        second.close()


def test_a_keys_rate_bucket_expires_once_it_would_be_full_again(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """AGTOS_RATE_LIMIT_PER_S=0.5, burst 2: one request leaves 1 token, refilled in 2 s; the bucket then
    expires (2 s + 1 s of slack), so an idle key leaves nothing behind (agtos/storage/rate_limit.py)."""
    with serve(AGTOS_RATE_LIMIT_PER_S="0.5", AGTOS_RATE_LIMIT_BURST="2") as client:
        key = new_user_key("rita")
        assert client.get("/api/memory/episodes", headers=key).status_code == 200
        [bucket] = raw_redis.scan_iter(match=f"{key_prefix}:{{auth}}:bucket:*")
        assert 2_000 < raw_redis.pttl(bucket) <= 3_000
