"""The session journal store on a real Redis: one list per live session, appended all or none with
its TTL renewed, the caps (turns and bytes per session, live sessions and journalled turns per
user) refused whole with the documented message, the catch-up reply (``seen``), and the per-user
counters that the caps read. Literal keys, limits and messages."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis

from agtos.config import Settings
from agtos.schemas import Role, Turn
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.session_journal import IndexedSession, JournalFull, JournalLimits, SessionJournal

TTL_S = 172_800  # 48 h


@pytest.fixture
def connector(settings: Settings) -> Iterator[RedisConnector]:
    conn = RedisConnector(settings.redis_url, settings.data_dir)
    yield conn
    conn.close()


def journal(connector: RedisConnector, prefix: str, ttl_s: int = TTL_S, **caps: int) -> SessionJournal:
    return SessionJournal(connector, GlobalKeys(prefix), ttl_s, JournalLimits(**caps) if caps else None)


def turn(content: str, at: int = 1_000) -> Turn:
    return Turn(role=Role.user, content=content, timestamp=at)


def list_key(prefix: str, session: str, who: str = "alice") -> str:
    return f"{prefix}:u:{{{who}}}:session:{session}:turns"


def counter_keys(prefix: str, who: str = "alice") -> tuple[str, str, str]:
    base = f"{prefix}:u:{{{who}}}:journals"
    return f"{base}:live", f"{base}:turns", f"{base}:bytes"


def size(t: Turn) -> int:
    return len(t.model_dump_json().encode())


def test_the_default_caps_are_the_documented_ones() -> None:
    assert JournalLimits() == JournalLimits(
        turns_per_session=5_000, bytes_per_session=1_048_576, sessions_per_user=100, turns_per_user=20_000
    )


def test_an_append_writes_the_list_counters_and_ttl(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    store = journal(connector, key_prefix)
    first, second, third = turn("hello"), turn("how are you", 2_000), turn("fine", 3_000)
    before = int(time.time() * 1000)
    done = store.append("alice", "s1", first)
    assert (done.length, done.reset, done.unseen) == (1, False, [])
    done = store.append("alice", "s1", [second, third], seen=1)
    assert (done.length, done.reset, done.unseen) == (3, False, [])
    after = int(time.time() * 1000)
    key = list_key(key_prefix, "s1")
    assert [json.loads(raw)["content"] for raw in raw_redis.lrange(key, 0, -1)] == ["hello", "how are you", "fine"]
    live, nturns, nbytes = counter_keys(key_prefix)
    for k in (key, live, nturns, nbytes):
        assert TTL_S - 5 <= raw_redis.ttl(k) <= TTL_S
    expiry = raw_redis.zscore(live, "s1")
    assert expiry is not None and before + TTL_S * 1000 <= expiry <= after + TTL_S * 1000
    assert raw_redis.hget(nturns, "s1") == b"3"
    assert int(raw_redis.hget(nbytes, "s1") or 0) == size(first) + size(second) + size(third)
    assert store.length("alice", "s1") == 3
    assert [t.content for t in store.turns("alice", "s1")] == ["hello", "how are you", "fine"]
    assert [t.content for t in store.turns("alice", "s1", 2)] == ["fine"]
    assert store.turns("alice", "s1")[1] == second
    assert store.length("bob", "s1") == 0 and store.turns("bob", "s1") == []


def test_the_reply_carries_the_entries_the_caller_has_not_seen(connector: RedisConnector, key_prefix: str) -> None:
    store = journal(connector, key_prefix)
    store.append("alice", "s1", [turn("a"), turn("b"), turn("c")])
    done = store.append("alice", "s1", turn("d"), seen=1)  # another worker appended b and c meanwhile
    assert (done.length, done.reset, [t.content for t in done.unseen]) == (4, False, ["b", "c"])
    done = store.append("alice", "s1", turn("e"), seen=4)
    assert (done.length, done.reset, done.unseen) == (5, False, [])
    # the caller thought there were 9: the journal was ended or expired meanwhile, so it gets all of it
    done = store.append("alice", "s1", turn("f"), seen=9)
    assert (done.length, done.reset, [t.content for t in done.unseen]) == (6, True, ["a", "b", "c", "d", "e"])
    store.clear("alice", "s1")
    done = store.append("alice", "s1", turn("g"), seen=6)
    assert (done.length, done.reset, done.unseen) == (1, True, [])


def test_clear_drops_the_list_and_its_counters_only(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    store = journal(connector, key_prefix)
    store.append("alice", "s1", [turn("a"), turn("b")])
    store.append("alice", "s2", turn("c"))
    store.append("bob", "s1", turn("d"))
    store.clear("alice", "s1")
    live, nturns, nbytes = counter_keys(key_prefix)
    assert raw_redis.exists(list_key(key_prefix, "s1")) == 0
    assert raw_redis.zrange(live, 0, -1) == [b"s2"]
    assert raw_redis.hkeys(nturns) == [b"s2"] and raw_redis.hkeys(nbytes) == [b"s2"]
    assert store.length("alice", "s2") == 1 and store.length("bob", "s1") == 1


def test_turns_per_session_cap(connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis) -> None:
    store = journal(connector, key_prefix, turns_per_session=3)
    store.append("alice", "s1", [turn("a"), turn("b")])
    with pytest.raises(JournalFull) as full:
        store.append("alice", "s1", [turn("c"), turn("d")])
    assert str(full.value) == (
        "session journal full: 2 turns journalled, 2 more would pass the cap of 3 turns per session "
        "(AGTOS_SESSION_MAX_TURNS); end the session (POST …/end) and continue in a new one"
    )
    assert store.length("alice", "s1") == 2  # nothing of the refused append was written
    assert raw_redis.hget(counter_keys(key_prefix)[1], "s1") == b"2"
    assert store.append("alice", "s1", turn("c")).length == 3  # exactly at the cap is allowed
    with pytest.raises(JournalFull):
        store.append("alice", "s1", turn("d"))
    assert store.append("alice", "s2", turn("x")).length == 1  # the cap is per session


def test_bytes_per_session_cap(connector: RedisConnector, key_prefix: str) -> None:
    one = size(turn("0123456789"))
    store = journal(connector, key_prefix, bytes_per_session=2 * one)
    store.append("alice", "s1", turn("0123456789"))
    with pytest.raises(JournalFull) as full:
        store.append("alice", "s1", [turn("abcdefghij"), turn("k")])
    assert str(full.value) == (
        f"session journal full: {one} bytes journalled, these turns would pass the cap of {2 * one} bytes per "
        "session (AGTOS_SESSION_MAX_BYTES); end the session (POST …/end) and continue in a new one"
    )
    assert store.append("alice", "s1", turn("abcdefghij")).length == 2  # exactly at the cap is allowed
    with pytest.raises(JournalFull):
        store.append("alice", "s1", turn("k"))


def test_live_sessions_per_user_cap(connector: RedisConnector, key_prefix: str) -> None:
    store = journal(connector, key_prefix, sessions_per_user=2)
    store.append("alice", "s1", turn("a"))
    store.append("alice", "s2", turn("b"))
    with pytest.raises(JournalFull) as full:
        store.append("alice", "s3", turn("c"))
    assert str(full.value) == (
        "too many live sessions: 2 are open for this user, the cap is 2 (AGTOS_USER_MAX_SESSIONS); end a session first"
    )
    assert store.append("alice", "s2", turn("b2")).length == 2  # a live session continues
    assert store.append("bob", "s3", turn("c")).length == 1  # another user's sessions do not count
    store.clear("alice", "s1")
    assert store.append("alice", "s3", turn("c")).length == 1


def test_journalled_turns_per_user_cap(connector: RedisConnector, key_prefix: str) -> None:
    store = journal(connector, key_prefix, turns_per_user=4)
    store.append("alice", "s1", [turn("a"), turn("b")])
    store.append("alice", "s2", turn("c"))
    with pytest.raises(JournalFull) as full:
        store.append("alice", "s3", [turn("d"), turn("e")])
    assert str(full.value) == (
        "too many journalled turns: 3 in this user's live sessions, 2 more would pass the cap of 4 "
        "(AGTOS_USER_MAX_TURNS); end a session first"
    )
    assert store.append("alice", "s2", turn("d")).length == 2  # exactly at the cap is allowed
    with pytest.raises(JournalFull):
        store.append("alice", "s1", turn("e"))
    store.clear("alice", "s1")
    assert store.append("alice", "s3", [turn("e"), turn("f")]).length == 2


def test_zero_means_no_cap(connector: RedisConnector, key_prefix: str) -> None:
    store = journal(
        connector, key_prefix, turns_per_session=0, bytes_per_session=0, sessions_per_user=0, turns_per_user=0
    )
    for n in range(3):
        assert store.append("alice", f"s{n}", [turn("x" * 50) for _ in range(4)]).length == 4


def test_expired_sessions_leave_the_counters(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """A session whose journal expired no longer counts against the live-session or turn caps."""
    store = journal(connector, key_prefix, ttl_s=1, sessions_per_user=1, turns_per_user=2)
    store.append("alice", "old", [turn("a"), turn("b")])
    time.sleep(1.1)
    done = store.append("alice", "new", [turn("c"), turn("d")])
    assert done.length == 2
    live, nturns, nbytes = counter_keys(key_prefix)
    assert raw_redis.zrange(live, 0, -1) == [b"new"]
    assert raw_redis.hkeys(nturns) == [b"new"] and raw_redis.hkeys(nbytes) == [b"new"]
    # a session id reused after its journal expired starts from zero
    time.sleep(1.1)
    assert store.append("alice", "new", turn("e"), seen=2) == type(done)(length=1, reset=True, unseen=[])
    assert raw_redis.hget(nturns, "new") == b"1"


def test_idle_lists_sessions_idle_long_enough_oldest_first(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """The global index (member ``user:session``, score: last append in ms) read by the idle sweep:
    sessions whose last append is at least ``older_than_s`` old, oldest first, at most ``limit``;
    members that do not name both a user and a session are skipped."""
    now = int(time.time() * 1000)
    index = f"{key_prefix}:meta:journals:live"
    raw_redis.zadd(
        index,
        {
            "bob:s2": now - 10_000,  # idle 10 s
            "alice:s1": now - 20_000,  # idle 20 s
            "alice:s3": now - 1_000,  # idle 1 s
            "nosep": now - 30_000,
            ":s4": now - 30_000,
            "carol:": now - 30_000,
        },
    )
    store = journal(connector, key_prefix)
    assert store.idle(5.0) == [
        IndexedSession("alice", "s1", float(now - 20_000)),
        IndexedSession("bob", "s2", float(now - 10_000)),
    ]
    assert store.idle(15.0) == [IndexedSession("alice", "s1", float(now - 20_000))]
    # the three malformed members are the oldest: read (and counted by the limit), then skipped
    assert store.idle(5.0, limit=4) == [IndexedSession("alice", "s1", float(now - 20_000))]
    assert [s.session_id for s in store.idle(0.5)] == ["s1", "s2", "s3"]
    assert store.idle(60.0) == []


def test_idle_counts_seconds_as_1000_ms(connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis) -> None:
    """An hour of idleness is 3,600,000 ms: a session idle for an hour and 2 s is listed, one idle for
    59 min 58 s is not (a cutoff off by 1 ms per second would move by 3.6 s)."""
    now = int(time.time() * 1000)
    raw_redis.zadd(f"{key_prefix}:meta:journals:live", {"alice:s1": now - 3_602_000, "alice:s2": now - 3_598_000})
    assert journal(connector, key_prefix).idle(3_600.0) == [IndexedSession("alice", "s1", float(now - 3_602_000))]


def test_idle_reads_1000_index_members_by_default(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    raw_redis.zadd(f"{key_prefix}:meta:journals:live", {f"u{i}:s": 1_000 + i for i in range(1_001)})
    found = journal(connector, key_prefix).idle(1.0)
    assert (len(found), found[0], found[-1]) == (
        1_000,
        IndexedSession("u0", "s", 1_000.0),
        IndexedSession("u999", "s", 1_999.0),
    )


def test_unindex_drops_a_member_only_if_no_append_renewed_it(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """The idle sweep's removal: a member read by ``idle`` goes unless its score (last append in ms)
    moved past the one read; a member another user or session holds is left, and so is one already gone."""
    index = f"{key_prefix}:meta:journals:live"
    raw_redis.zadd(index, {"alice:s1": 5_000, "alice:s2": 5_000, "bob:s1": 5_000, "alice:s3": 9_000})
    store = journal(connector, key_prefix)
    assert store.unindex(IndexedSession("alice", "s1", 5_000.0)) is True  # unchanged since read
    assert store.unindex(IndexedSession("alice", "s2", 6_000.0)) is True  # read later than its score
    assert store.unindex(IndexedSession("alice", "s3", 8_999.0)) is False  # renewed by an append since
    assert store.unindex(IndexedSession("alice", "s1", 5_000.0)) is False  # already gone
    assert store.unindex(IndexedSession("carol", "s1", 5_000.0)) is False  # never indexed
    assert raw_redis.zrange(index, 0, -1, withscores=True) == [(b"bob:s1", 5_000.0), (b"alice:s3", 9_000.0)]


def test_a_real_append_renews_the_index_so_unindex_keeps_it(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """Through the store: the append indexes the session with its time; an entry read before a later
    append does not remove it."""
    store = journal(connector, key_prefix)
    store.append("alice", "s1", turn("first"))
    (read,) = store.idle(0.0)
    time.sleep(0.01)
    store.append("alice", "s1", turn("second"))
    assert store.unindex(read) is False
    assert raw_redis.zscore(f"{key_prefix}:meta:journals:live", "alice:s1") is not None
    (again,) = store.idle(0.0)
    assert store.unindex(again) is True
    assert raw_redis.zscore(f"{key_prefix}:meta:journals:live", "alice:s1") is None


def test_forget_user_drops_only_that_users_index_members(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """Forget-all / opt-out: every live-journal index member of the user goes (how many is returned),
    no other user's, not even one whose id starts with the same letters; nothing to drop returns 0."""
    index = f"{key_prefix}:meta:journals:live"
    raw_redis.zadd(index, {"alice:s1": 1_000, "alice:s2": 2_000, "alicex:s1": 3_000, "bob:alice": 4_000})
    store = journal(connector, key_prefix)
    assert store.forget_user("alice") == 2
    assert raw_redis.zrange(index, 0, -1) == [b"alicex:s1", b"bob:alice"]
    assert store.forget_user("alice") == 0
    assert store.forget_user("carol") == 0
    assert raw_redis.zcard(index) == 2


def test_clear_with_a_read_removes_only_the_turns_read(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """A session end clears what it read: a turn appended after the read stays, the session live and
    indexed, its counters lowered by exactly the entries removed."""
    store = journal(connector, key_prefix)
    store.append("alice", "s1", [turn("a"), turn("b")])
    read = store.read("alice", "s1")
    store.append("alice", "s1", turn("c"))
    assert store.clear("alice", "s1", read) == 1
    assert [t.content for t in store.turns("alice", "s1")] == ["c"]
    live, nturns, nbytes = counter_keys(key_prefix)
    assert raw_redis.hget(nturns, "s1") == b"1"
    assert raw_redis.hget(nbytes, "s1") == str(size(turn("c"))).encode()
    assert raw_redis.zrange(live, 0, -1) == [b"s1"]
    assert [s.session_id for s in store.idle(0)] == ["s1"]
    assert store.clear("alice", "s1", store.read("alice", "s1")) == 0
    assert raw_redis.exists(list_key(key_prefix, "s1"), live, nturns, nbytes) == 0 and store.idle(0) == []


def test_an_empty_append_is_a_no_op_with_the_catch_up(
    connector: RedisConnector, key_prefix: str, raw_redis: redis.Redis
) -> None:
    """No turns: nothing written, not refused (length 0 on a new session), and the reply still
    carries the entries the caller has not seen."""
    store = journal(connector, key_prefix, sessions_per_user=1)
    done = store.append("alice", "s1", [])
    assert (done.length, done.reset, done.unseen) == (0, False, [])
    assert raw_redis.exists(list_key(key_prefix, "s1"), *counter_keys(key_prefix)) == 0 and store.idle(0) == []
    store.append("alice", "s1", [turn("a")])
    done = store.append("alice", "s1", [], seen=0)
    assert (done.length, done.reset, [t.content for t in done.unseen]) == (1, False, ["a"])
