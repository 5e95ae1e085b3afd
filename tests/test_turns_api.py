"""Every word of an ended session is kept (issue 14): turns posted through the HTTP API and ended are
stored verbatim with speaker, timestamp as sent, position and resolved dates, indexed for BM25 and
vector search (long turns in windows), exported, and gone from Redis and every index after forget,
opt-out or expiry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import redis
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.tasks.dates import format_turn
from tests.helpers import user

MAY_8 = int(datetime(2023, 5, 8, 18, 0, tzinfo=UTC).timestamp() * 1000)
TWO_SPEAKERS = [
    {"role": "user", "name": "Caroline", "content": "I went to the LGBTQ support group yesterday, it was powerful"},
    {"role": "assistant", "name": "Melanie", "content": "That's amazing! I ran a charity race for mental health"},
    {"role": "user", "name": "Caroline", "content": "I'm researching adoption agencies, I want to give kids a home"},
    {"role": "assistant", "name": "Melanie", "content": "You'd be a great mum. I'm taking my kids camping next month"},
]


def end(
    client: TestClient, user_id: str, session_id: str, turns: list[dict[str, Any]], at: int = MAY_8, **extra: Any
) -> str:
    """Post the turns (a minute apart from ``at``), end the session; the stored episode's id."""
    timed = [{**t, "timestamp": at + i * 60_000} for i, t in enumerate(turns)]
    body = {"turns": timed, **extra}
    posted = client.post(f"/api/memory/sessions/{session_id}/turns", json=body, headers=user(user_id))
    assert posted.status_code == 200, posted.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(user_id))
    assert ended.status_code == 200, ended.text
    assert ended.json()["saved"], ended.json()
    return ended.json()["episode"]["id"]


def turn_keys(raw: redis.Redis, prefix: str, user_id: str) -> dict[str, set[str]]:
    """The user's turn lists and turn index entries, found by SCAN of the key families."""
    base = f"{prefix}:u:{{{user_id}}}"
    lists = {k.decode() for k in raw.scan_iter(match=f"{base}:turns:*", count=1_000)}
    postings = {k.decode() for k in raw.scan_iter(match=f"{base}:turn:_idx:bm25:t:*", count=1_000)}
    docs = {
        d.decode() for part in ("bm25:len", "bm25:terms", "vec:data") for d in raw.hkeys(f"{base}:turn:_idx:{part}")
    }
    return {"lists": lists, "postings": postings, "docs": docs}


def test_yesterday_in_a_turn_of_8_may_2023_is_stored_and_shown_as_7_may(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    episode_id = end(client, "caro", "s-may", TWO_SPEAKERS)
    turns = coordinator.semantic.turns.episode_turns("caro", episode_id)
    assert turns[0].timestamp == MAY_8  # the historical time as sent, not the time of the request
    assert [(d.text, d.date) for d in turns[0].dates] == [("yesterday", "2023-05-07")]
    assert format_turn(turns[0]) == (
        "(8 May 2023) Caroline: I went to the LGBTQ support group yesterday [= 7 May 2023], it was powerful"
    )
    assert [(d.text, d.date, d.period) for d in turns[3].dates] == [("next month", "2023-06-08", "month")]


def test_a_two_speaker_session_keeps_every_turn_with_its_speaker(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    prefixed = [{"role": t["role"], "content": f"{t['name']}: {t['content']}"} for t in TWO_SPEAKERS]
    unnamed = [{"role": t["role"], "content": t["content"]} for t in TWO_SPEAKERS]
    on_session = {"speakers": {"user": "Caroline", "assistant": "Melanie"}}  # names given on the session
    for session_id, turns, extra in (
        ("s-named", TWO_SPEAKERS, {}),
        ("s-prefixed", prefixed, {}),
        ("s-given", unnamed, on_session),
    ):
        episode_id = end(client, "pair", session_id, turns, **extra)
        kept = coordinator.semantic.turns.episode_turns("pair", episode_id)
        assert [(t.position, t.role, t.name, t.session_id) for t in kept] == [
            (0, "user", "Caroline", session_id),
            (1, "assistant", "Melanie", session_id),
            (2, "user", "Caroline", session_id),
            (3, "assistant", "Melanie", session_id),
        ]
        assert [t.content for t in kept] == [t["content"] for t in turns]  # verbatim
    # what the second speaker said is searchable, and maps back to (episode, session, position)
    found = coordinator.semantic.search("turn", "pair", "charity race", 3, mode="bm25")
    (match, *_) = coordinator.semantic.turns.lookup("pair", found.results)
    assert (match.turn.name, match.turn.position) == ("Melanie", 1)
    assert [t.position for t in match.window] == [0, 1, 2]
    assert coordinator.semantic.search("turn", "someone-else", "charity race", 3, mode="bm25").results == []
    body = {"turns": unnamed, "speakers": {"guest": "Ann"}}
    bad = client.post("/api/memory/sessions/s-x/turns", json=body, headers=user("pair"))
    assert bad.status_code == 422 and "speakers" in bad.text, bad.text  # speakers are named by role


def test_turns_live_as_long_as_their_episode_and_are_exported(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str, tmp_path: Path
) -> None:
    episode_id = end(client, "caro", "s-ttl", TWO_SPEAKERS)
    assert 2_592_000 - 60 < raw_redis.ttl(f"{key_prefix}:u:{{caro}}:turns:{episode_id}") <= 2_592_000  # 30 days
    export_snapshot(coordinator.services, tmp_path / "snap", users=["caro"])
    rows = pq.read_table(tmp_path / "snap" / "turns.parquet").to_pylist()
    assert [(r["episode_id"], r["position"], r["name"]) for r in rows] == [
        (episode_id, i, t["name"]) for i, t in enumerate(TWO_SPEAKERS)
    ]


def test_forget_an_episode_removes_its_turns_from_redis_and_every_index(
    client: TestClient, raw_redis: redis.Redis, key_prefix: str
) -> None:
    gone = end(client, "caro", "s-1", TWO_SPEAKERS)
    kept = end(client, "caro", "s-2", [{"role": "user", "name": "Caroline", "content": "I bought a red guitar"}])
    before = turn_keys(raw_redis, key_prefix, "caro")
    assert {d.split(".t")[0] for d in before["docs"]} == {gone, kept} and len(before["lists"]) == 2
    forgot = client.post("/api/memory/forget", json={"kind": "episode", "id": gone}, headers=user("caro"))
    assert forgot.status_code == 200, forgot.text
    after = turn_keys(raw_redis, key_prefix, "caro")
    assert after["lists"] == {f"{key_prefix}:u:{{caro}}:turns:{kept}"}
    assert after["docs"] == {f"{kept}.t0"}
    assert not any(k.endswith((":t:support", ":t:charity", ":t:adoption")) for k in after["postings"])


def test_forget_all_and_opt_out_leave_no_turn_key(client: TestClient, raw_redis: redis.Redis, key_prefix: str) -> None:
    for user_id in ("caro", "mel", "other"):
        end(client, user_id, "s-1", TWO_SPEAKERS)
    assert client.post("/api/memory/forget", json={"kind": "all"}, headers=user("caro")).status_code == 200
    opted = client.put("/api/memory/privacy", json={"opt_out": True, "forget_existing": True}, headers=user("mel"))
    assert opted.status_code == 200, opted.text
    for user_id in ("caro", "mel"):
        assert turn_keys(raw_redis, key_prefix, user_id) == {"lists": set(), "postings": set(), "docs": set()}
    assert len(turn_keys(raw_redis, key_prefix, "other")["docs"]) == 4  # the others' turns untouched
    # an opted-out user's next session writes no turn
    posted = client.post(
        "/api/memory/sessions/s-2/turns", json={"turns": TWO_SPEAKERS}, headers=user("mel")
    ).status_code
    assert posted == 200 and client.post("/api/memory/sessions/s-2/end", headers=user("mel")).status_code == 200
    assert turn_keys(raw_redis, key_prefix, "mel") == {"lists": set(), "postings": set(), "docs": set()}


def test_expired_turns_leave_every_index(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    episode_id = end(client, "caro", "s-1", TWO_SPEAKERS)
    raw_redis.delete(f"{key_prefix}:u:{{caro}}:turns:{episode_id}")  # what the TTL does at 30 days
    assert coordinator.semantic.search("turn", "caro", "charity race", 5).results == []
    coordinator.semantic.turns.prune("caro")  # the sweep for what no search touched
    assert turn_keys(raw_redis, key_prefix, "caro") == {"lists": set(), "postings": set(), "docs": set()}


def test_a_long_turn_is_found_by_a_phrase_near_its_end(client: TestClient, coordinator: MemoryCoordinator) -> None:
    filler = " ".join(
        f"On day {i} of the road trip we drove through farmland, stopped for coffee and talked about music."
        for i in range(1, 21)
    )  # ~400 tokens of the same trip
    ending = "At the very end my grandmother gave me her antique brass telescope as a birthday present."
    long_turn = {"role": "user", "name": "Caroline", "content": f"{filler} {ending}"}
    end(client, "caro", "s-long", [long_turn, {"role": "assistant", "name": "Melanie", "content": "What a trip!"}])
    found = coordinator.semantic.search("turn", "caro", "grandmother's antique brass telescope gift", 3, mode="vector")
    assert found.mode == "vector" and found.results
    top = found.results[0].id
    assert top.endswith(".t0.c1") or top.endswith(".t0.c2"), top  # a later window of the long turn
    (match,) = coordinator.semantic.turns.lookup("caro", found.results[:1])
    assert match.turn.content.endswith(ending)
