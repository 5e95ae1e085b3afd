"""The session journal through the API: turns journalled in Redis for 48 h (172,800 s), a session
replayed after a restart, ended once, and nothing journalled for an opted-out user."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Role, Turn
from agtos.serving.app import create_app
from agtos.storage.keys import InvalidIdentifier
from agtos.storage.redis_conn import StorageUnavailable
from tests.helpers import SKIPPED, user

JOURNAL_TTL_S = 48 * 3600  # README: "Turns are also journalled in Redis (48 h)"


@contextmanager
def restarted(settings: Settings) -> Iterator[TestClient]:
    """A second API process on the same Redis (what a restart or another worker sees)."""
    coordinator = MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client
    finally:
        coordinator.close()


def journal_key(prefix: str, user_id: str, session_id: str) -> str:
    return f"{prefix}:u:{{{user_id}}}:session:{session_id}:turns"


def post(client: TestClient, user_id: str, session_id: str, *contents: str) -> dict:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": c} for i, c in enumerate(contents)]
    response = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()


def get_session(client: TestClient, user_id: str, session_id: str) -> tuple[int, dict]:
    response = client.get(f"/api/memory/sessions/{session_id}", headers=user(user_id))
    return response.status_code, response.json()


def end(client: TestClient, user_id: str, session_id: str) -> dict:
    response = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()


def journal(raw: redis.Redis, key: str) -> list[tuple[str, str]]:
    return [(t["role"], t["content"]) for t in map(json.loads, raw.lrange(key, 0, -1))]


def test_turns_are_journalled_in_order_for_48_hours(
    client: TestClient, key_prefix: str, raw_redis: redis.Redis
) -> None:
    post(client, "alice", "s1", "first question", "first answer")
    post(client, "alice", "s1", "second question")
    key = journal_key(key_prefix, "alice", "s1")
    assert journal(raw_redis, key) == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]
    assert JOURNAL_TTL_S - 5 <= raw_redis.ttl(key) <= JOURNAL_TTL_S == 172_800
    assert raw_redis.exists(journal_key(key_prefix, "bob", "s1")) == 0


def test_a_full_journal_refuses_the_append_and_keeps_every_turn(
    client: TestClient, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """Issue 15 changed this: past 5,000 turns (AGTOS_SESSION_MAX_TURNS) the append is refused with
    413; the journal used to drop its oldest turn instead."""
    post(client, "alice", "s1", "turn 0")
    key = journal_key(key_prefix, "alice", "s1")
    raw_redis.rpush(
        key, *[json.dumps({"role": "user", "content": f"turn {i}", "timestamp": i}) for i in range(1, 5000)]
    )
    refused = client.post(
        "/api/memory/sessions/s1/turns",
        json={"turns": [{"role": "user", "content": "turn 5000"}]},
        headers=user("alice"),
    )
    assert refused.status_code == 413
    assert "5000 turns per session (AGTOS_SESSION_MAX_TURNS)" in refused.json()["message"]
    kept = journal(raw_redis, key)
    assert len(kept) == 5000
    assert kept[0] == ("user", "turn 0") and kept[-1] == ("user", "turn 4999")


def test_a_session_continues_after_a_restart(
    client: TestClient, settings: Settings, key_prefix: str, raw_redis: redis.Redis
) -> None:
    first = ["Please convert the invoice totals to euros", "Done, totals are in euros now"]
    post(client, "alice", "s1", *first)
    with restarted(settings) as other:
        status, body = get_session(other, "alice", "s1")
        assert status == 200 and body["messageCount"] == 2
        assert [m["content"] for m in body["messages"]] == first
        assert get_session(other, "bob", "s1")[0] == 404
        assert get_session(other, "alice", "s2")[0] == 404
        post(other, "alice", "s1", "Also round them to cents")
        body = get_session(other, "alice", "s1")[1]  # issue 15: the append answers counts, GET the messages
        assert [m["content"] for m in body["messages"]] == [*first, "Also round them to cents"]
        assert other.get("/health").json()["tiers"]["working"]["sessions"] == 1  # the replayed session itself
    with restarted(settings) as other:  # the first call after a restart is a new turn: replayed first
        assert post(other, "alice", "s1", "And show the currency sign")["messageCount"] == 4
        body = get_session(other, "alice", "s1")[1]
        assert [m["content"] for m in body["messages"]] == [
            *first,
            "Also round them to cents",
            "And show the currency sign",
        ]
        assert len(journal(raw_redis, journal_key(key_prefix, "alice", "s1"))) == 4


def test_a_long_journal_folds_when_replayed(client: TestClient, settings: Settings) -> None:
    post(client, "alice", "s1", *[f"message number {i}" for i in range(40)])
    with restarted(settings) as other:
        status, body = get_session(other, "alice", "s1")
    # 30 messages / keep 6: the 31st folds turns 0-24 into one summary; 9 more follow
    assert status == 200 and body["messageCount"] == 1 + 6 + 9 and body["compactions"] == 1
    assert body["messages"][0]["role"] == "system" and body["messages"][0]["is_summary"] is True
    assert [m["content"] for m in body["messages"][1:]] == [f"message number {i}" for i in range(25, 40)]


def test_ending_a_session_stores_it_once_and_clears_the_journal(
    client: TestClient, settings: Settings, key_prefix: str, raw_redis: redis.Redis
) -> None:
    post(client, "alice", "s1", "I prefer answers in metric units, please remember that", "Noted, metric units.")
    with restarted(settings) as other:  # any API process can end it: the turns come from the journal
        assert get_session(other, "alice", "s1")[0] == 200  # replayed into this process's working memory
        events: list[dict] = []
        other.app.state.coordinator.events.subscribe("sessionEnded", events.append)
        ended = end(other, "alice", "s1")
        assert events == [{"user_id": "alice", "session_id": "s1", "episode_id": ended["episode"]["id"]}]
        assert ended["sessionId"] == "s1" and ended["saved"] is True and ended["reason"] == "stated preference"
        listed = other.get("/api/memory/episodes", headers=user("alice")).json()["episodes"]
        assert [e["id"] for e in listed] == [ended["episode"]["id"]] and ended["episode"]["type"] == "preference"
        assert raw_redis.exists(journal_key(key_prefix, "alice", "s1")) == 0
        assert get_session(other, "alice", "s1")[0] == 404
        user_base = f"{key_prefix}:u:{{alice}}"
        assert raw_redis.exists(f"{user_base}:dreamed:{ended['episode']['id']}") == 1  # the Dreamer ran for it
        assert raw_redis.hget(f"{user_base}:qai:s1", "last_saved_at") is not None
        again = end(other, "alice", "s1")
        assert again == {
            "sessionId": "s1",
            "saved": False,
            "reason": "session has no turns",
            "episode": None,
            **SKIPPED,
            # the retry learns where the turns went (tests/test_issue15_h15_end_retry.py)
            "lastEnd": {**again["lastEnd"], "episodeId": ended["episode"]["id"], "status": "done", "saved": True},
        }
        assert other.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 0


def test_a_session_id_continued_after_its_end_gives_a_new_episode(client: TestClient) -> None:
    post(client, "alice", "s1", "I prefer answers in metric units, please remember that", "Noted.")
    first = end(client, "alice", "s1")["episode"]["id"]
    post(client, "alice", "s1", "Actually I prefer imperial units for cooking, please remember", "Noted.")
    second = end(client, "alice", "s1")["episode"]["id"]
    assert first != second
    listed = client.get("/api/memory/episodes", headers=user("alice")).json()["episodes"]
    assert sorted(e["id"] for e in listed) == sorted([first, second])


def test_a_session_not_worth_saving_is_cleared_too(client: TestClient, key_prefix: str, raw_redis: redis.Redis) -> None:
    post(client, "alice", "s2", "another live session")
    post(client, "alice", "s1", "hi", "hello!")
    assert client.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 2
    ended = end(client, "alice", "s1")
    assert ended == {
        "sessionId": "s1",
        "saved": False,
        "reason": "greeting or small talk only",
        "episode": None,
        **SKIPPED,
    }
    assert raw_redis.exists(journal_key(key_prefix, "alice", "s1")) == 0
    assert get_session(client, "alice", "s1")[0] == 404
    assert get_session(client, "alice", "s2")[0] == 200  # clearing one session leaves the user's others
    assert client.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 1


def test_a_journalled_session_whose_journal_is_gone_is_not_stored_from_memory(
    client: TestClient, coordinator: MemoryCoordinator, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """Gone: ended on another process, forgotten there, or expired (48 h, past the 30 min idle sweep);
    this process's copy is stale and is dropped, never stored (issue 15: no forgotten turns return)."""
    post(client, "alice", "s1", "I prefer answers in metric units, please remember that", "Noted, metric units.")
    raw_redis.delete(journal_key(key_prefix, "alice", "s1"))
    ended = end(client, "alice", "s1")
    assert ended["saved"] is False and ended["reason"] == "session has no turns"
    assert get_session(client, "alice", "s1")[0] == 404
    assert client.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 0
    # evicted from working memory (LRU) with its journal expired: nothing to store, the activity ends
    post(client, "alice", "s2", "a turn that will be lost")
    raw_redis.delete(journal_key(key_prefix, "alice", "s2"))
    coordinator.working.drop("alice", "s2")
    assert end(client, "alice", "s2")["reason"] == "session has no turns"
    assert client.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 0


def test_an_opted_out_user_keeps_working_memory_only(
    client: TestClient, settings: Settings, key_prefix: str, raw_redis: redis.Redis
) -> None:
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga")).status_code == 200
    assert end(client, "olga", "s1")["reason"] == "session has no turns"
    post(client, "olga", "s1", "I prefer answers in metric units, please remember that")
    post(client, "olga", "s1", "and in short sentences")
    post(client, "olga", "s2", "another live session")
    assert raw_redis.exists(journal_key(key_prefix, "olga", "s1")) == 0
    status, body = get_session(client, "olga", "s1")
    assert status == 200 and body["messageCount"] == 2
    with restarted(settings) as other:
        assert get_session(other, "olga", "s1")[0] == 404  # nothing persisted to replay
    ended = end(client, "olga", "s1")
    assert ended == {
        "sessionId": "s1",
        "saved": False,
        "reason": "user opted out of persistence",
        "episode": None,
        **SKIPPED,
    }
    assert get_session(client, "olga", "s1")[0] == 404
    assert get_session(client, "olga", "s2")[0] == 200  # ending one session leaves the others
    assert client.get("/api/memory/episodes", headers=user("olga")).json()["count"] == 0
    assert client.get("/health").json()["checks"]["resource-guard"]["activeSessions"] == 1


def test_the_coordinator_rejects_bad_ids_before_touching_anything(coordinator: MemoryCoordinator) -> None:
    """Python callers (CLI, flows) do not go through the API's path validation."""
    turn = Turn(role=Role.user, content="hello there")
    bad_user = [
        lambda: coordinator.add_turn("a:b", "s1", turn),
        lambda: coordinator.session("a:b", "s1"),
        lambda: coordinator.end_session("a:b", "s1"),
        lambda: coordinator.search_episodes("a:b", "hello"),
        lambda: coordinator.build_context("a:b", "hello"),
    ]
    bad_session = [
        lambda: coordinator.add_turn("alice", "s:1", turn),
        lambda: coordinator.session("alice", "s:1"),
        lambda: coordinator.end_session("alice", "s:1"),
    ]
    for calls, message in ((bad_user, "^user id must be "), (bad_session, "^session id must be ")):
        for call in calls:
            with pytest.raises(InvalidIdentifier, match=message):
                call()
    assert coordinator.working.active_sessions() == []


def test_without_redis_an_append_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    """Issue 15 changed this: an append that cannot be journalled raises (the API answers 503, see
    test_durability.py) and leaves nothing in working memory; it used to be kept in this process only."""
    settings = Settings(
        redis_url="redis://127.0.0.1:1/0",  # nothing listens there
        key_prefix="offline",
        data_dir=tmp_path / "data",
        config_dir=tmp_path / "config",
        redis_timeout_s=0.3,
    )
    coordinator = MemoryCoordinator(settings)
    try:
        with pytest.raises(StorageUnavailable):
            coordinator.add_turn("alice", "s1", Turn(role=Role.user, content="first question"))
        assert coordinator.session("alice", "s1") is None
        assert coordinator.working.active_sessions() == []
        assert coordinator.build_context("alice", "question", "s1")["available"] is False
    finally:
        coordinator.close()
