"""EpisodeStore on a real Redis: key layout, the 30-day TTL as a literal, timeline paging and expiry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from agtos.config import Settings
from agtos.schemas import Episode
from agtos.storage.dream_markers import PendingMark
from agtos.storage.episodes import EpisodeStore
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

THIRTY_DAYS_S = 2_592_000


@pytest.fixture
def episodes(settings: Settings) -> Iterator[EpisodeStore]:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    yield EpisodeStore(connector, GlobalKeys(settings.key_prefix), THIRTY_DAYS_S)
    connector.close()


def episode(i: int, user: str = "alice") -> Episode:
    return Episode(id=f"ep-{i}", user_id=user, session_id=f"s{i}", summary=f"session {i}", timestamp=1_000 * i)


def expire_now(raw: redis.Redis, key: str) -> None:
    """A real expiry (1 ms TTL), not a delete."""
    raw.pexpire(key, 1)
    time.sleep(0.01)


def test_save_writes_the_record_timeline_and_user_with_the_30_day_ttl(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    ep = episode(1)
    assert episodes.save(ep) is ep
    record = f"{key_prefix}:u:{{alice}}:episode:ep-1"
    timeline = f"{key_prefix}:u:{{alice}}:episodes:by_time"
    assert Episode.model_validate_json(raw_redis.get(record)) == ep
    assert THIRTY_DAYS_S - 5 <= raw_redis.ttl(record) <= THIRTY_DAYS_S
    assert THIRTY_DAYS_S - 5 <= raw_redis.ttl(timeline) <= THIRTY_DAYS_S
    assert raw_redis.zrange(timeline, 0, -1, withscores=True) == [(b"ep-1", 1_000.0)]
    assert raw_redis.smembers(f"{key_prefix}:users") == {b"alice"}
    assert THIRTY_DAYS_S - 5 <= episodes.ttl("alice", "ep-1") <= THIRTY_DAYS_S
    assert episodes.get("alice", "ep-1") == ep
    assert episodes.get("bob", "ep-1") is None
    assert episodes.get("alice", "ep-2") is None


def test_a_shorter_ttl_applies_to_the_record_but_never_shortens_the_timeline(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    episodes.save(episode(1), ttl_seconds=600)
    assert 595 <= episodes.ttl("alice", "ep-1") <= 600
    assert raw_redis.ttl(f"{key_prefix}:u:{{alice}}:episodes:by_time") > THIRTY_DAYS_S - 5
    episodes.save(episode(2), ttl_seconds=THIRTY_DAYS_S * 2)
    assert raw_redis.ttl(f"{key_prefix}:u:{{alice}}:episodes:by_time") > THIRTY_DAYS_S * 2 - 5
    assert episodes.ttl("alice", "ep-404") == -2


def test_existing_ids_and_delete(episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    for i in (1, 2):
        episodes.save(episode(i))
    assert episodes.existing_ids("alice", []) == set()
    assert episodes.existing_ids("alice", ["ep-1", "ep-2", "ep-3"]) == {"ep-1", "ep-2"}
    assert episodes.existing_ids("bob", ["ep-1"]) == set()
    assert episodes.delete("alice", "ep-1") is True
    assert episodes.delete("alice", "ep-1") is False
    assert raw_redis.zrange(f"{key_prefix}:u:{{alice}}:episodes:by_time", 0, -1) == [b"ep-2"]
    assert episodes.existing_ids("alice", ["ep-1", "ep-2"]) == {"ep-2"}


def test_recent_is_newest_first_and_limited(episodes: EpisodeStore) -> None:
    for i in (3, 1, 4, 2, 5):
        episodes.save(episode(i))
    episodes.save(episode(9, user="bob"))
    assert [e.id for e in episodes.recent("alice", 3)] == ["ep-5", "ep-4", "ep-3"]
    assert [e.id for e in episodes.recent("alice", 10)] == ["ep-5", "ep-4", "ep-3", "ep-2", "ep-1"]
    assert episodes.recent("alice", 0) == []
    assert [e.id for e in episodes.recent("bob", 10)] == ["ep-9"]
    assert episodes.recent("carol", 10) == []


def test_paging_drops_expired_ids_from_the_timeline_without_skipping_live_ones(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    for i in range(1, 11):
        episodes.save(episode(i))
    for i in (10, 9, 6, 2):
        expire_now(raw_redis, f"{key_prefix}:u:{{alice}}:episode:ep-{i}")
    live = ["ep-8", "ep-7", "ep-5", "ep-4", "ep-3", "ep-1"]
    assert [e.id for e in episodes.iter_all("alice", batch_size=3)] == live
    timeline = f"{key_prefix}:u:{{alice}}:episodes:by_time"
    assert sorted(m.decode() for m in raw_redis.zrange(timeline, 0, -1)) == sorted(live)
    assert [e.id for e in episodes.iter_all("alice", batch_size=2)] == live
    assert [e.id for e in episodes.iter_all("alice")] == live
    assert [e.id for e in episodes.recent("alice", 2)] == live[:2]


def test_deleting_an_expired_episode_reports_it_gone_and_cleans_the_timeline(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    episodes.save(episode(1))
    expire_now(raw_redis, f"{key_prefix}:u:{{alice}}:episode:ep-1")
    assert episodes.delete("alice", "ep-1") is False  # nothing left to delete: the episode had expired
    assert raw_redis.exists(f"{key_prefix}:u:{{alice}}:episodes:by_time") == 0


def ghost_ids(raw: redis.Redis, prefix: str, n: int) -> None:
    """``n`` timeline ids older than any episode, whose records have expired."""
    raw.zadd(f"{prefix}:u:{{alice}}:episodes:by_time", {f"gone-{i}": i for i in range(n)})


def test_recent_reads_one_page_of_50_and_no_more(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """recent(1) reads the newest 50 timeline ids: the 49 expired among them leave the timeline, the 50th stays."""
    episodes.save(episode(100))
    ghost_ids(raw_redis, key_prefix, 50)
    assert [e.id for e in episodes.recent("alice", 1)] == ["ep-100"]
    assert raw_redis.zrange(f"{key_prefix}:u:{{alice}}:episodes:by_time", 0, -1) == [b"gone-0", b"ep-100"]


def test_iter_all_reads_pages_of_500(episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    """A consumer that stops after the first episode has read (and cleaned) one page of 500 ids."""
    episodes.save(episode(1_000))
    ghost_ids(raw_redis, key_prefix, 501)
    all_episodes = episodes.iter_all("alice")
    assert next(all_episodes).id == "ep-1000"
    all_episodes.close()
    assert raw_redis.zrange(f"{key_prefix}:u:{{alice}}:episodes:by_time", 0, -1) == [b"gone-0", b"gone-1", b"ep-1000"]


def test_save_and_delete_are_each_one_transaction(episodes: EpisodeStore, redis_url: str, key_prefix: str) -> None:
    """Record, timeline id and timeline TTL change together (MULTI/EXEC, seen by MONITOR): no reader sees a
    saved episode that ``recent`` does not list; the global users set stays outside (a cluster slot of its own)."""
    monitor_client = redis.Redis.from_url(redis_url, socket_timeout=10)
    inside: dict[str, bool] = {}  # client -> between its MULTI and EXEC
    ours: list[tuple[str, bool]] = []  # (command name, inside a transaction) of the commands on our keys
    with monitor_client.monitor() as monitor:
        episodes.save(episode(1))
        episodes.delete("alice", "ep-1")
        while len(ours) < 6:
            seen = monitor.next_command()
            client, name = f"{seen['client_address']}:{seen['client_port']}", seen["command"].split(" ", 1)[0]
            if name in ("MULTI", "EXEC"):
                inside[client] = name == "MULTI"
            elif key_prefix in seen["command"]:
                ours.append((name, inside.get(client, False)))
    monitor_client.close()
    assert ours == [("SET", True), ("ZADD", True), ("EXPIRE", True), ("SADD", False), ("DEL", True), ("ZREM", True)]


def test_ids_between_is_half_open_oldest_first_per_user_and_limited(episodes: EpisodeStore) -> None:
    """[start, end): an episode at the start is in, one at the end is out; ``limit`` keeps the oldest."""
    for i in (4, 1, 3, 2, 5):
        episodes.save(episode(i))
    episodes.save(episode(3, user="bob"))
    assert episodes.ids_between("alice", 2_000, 4_000) == ["ep-2", "ep-3"]
    assert episodes.ids_between("alice", 0, 10_000, limit=2) == ["ep-1", "ep-2"]
    assert episodes.ids_between("alice", 5_001, 10_000) == []
    assert episodes.ids_between("bob", 0, 10_000) == ["ep-3"]
    assert episodes.ids_between("carol", 0, 10_000) == []


def test_ids_between_lists_50_by_default(episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    ghost_ids(raw_redis, key_prefix, 60)  # scores 0..59
    found = episodes.ids_between("alice", 0, 100)
    assert (len(found), found[0], found[-1]) == (50, "gone-0", "gone-49")


def test_session_ids_names_each_stored_episodes_session_once(episodes: EpisodeStore) -> None:
    """An episode gone, of another user, or without a session (imported: '') is left out."""
    for ep in (episode(1), episode(2), episode(4, user="bob")):
        episodes.save(ep)
    episodes.save(Episode(id="ep-3", user_id="alice", session_id="", summary="imported", timestamp=3_000))
    wanted = ["ep-2", "ep-1", "ep-2", "ep-3", "ep-9", "ep-4"]
    assert episodes.session_ids("alice", iter(wanted)) == {"ep-2": "s2", "ep-1": "s1"}
    assert episodes.session_ids("alice", []) == {}
    assert episodes.session_ids("bob", ["ep-4", "ep-1"]) == {"ep-4": "s4"}


def test_import_digests_tell_unchanged_sessions_apart(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """An imported session is unchanged when its turns' digest is the one recorded and its episode is still
    there, or when it was skipped then (not worth an episode) from the same turns; anything else is new."""
    assert episodes.unchanged_imports("alice", {}) == set()
    episodes.record_imports("alice", {}, {})
    assert raw_redis.keys(f"{key_prefix}:*") == []  # nothing to record: no key
    episodes.save(episode(1))
    episodes.save(episode(3))
    episodes.record_imports("alice", {"ep-1": "d1", "ep-2": "d2", "ep-3": "d3"}, {"ep-4": "d4"})
    digests = f"{key_prefix}:u:{{alice}}:imports:_digests"  # a collection key of the family "imports"
    assert raw_redis.hgetall(digests) == {b"ep-1": b"d1", b"ep-2": b"d2", b"ep-3": b"d3", b"ep-4": b"skipped:d4"}
    asked = {"ep-1": "d1", "ep-2": "d2", "ep-3": "changed", "ep-4": "d4", "ep-5": "d5"}
    # ep-2 recorded but its episode is gone (forgotten, expired): imported again; ep-3's turns changed
    assert episodes.unchanged_imports("alice", asked) == {"ep-1", "ep-4"}
    assert episodes.unchanged_imports("alice", {"ep-4": "other"}) == set()  # skipped, but from other turns
    assert episodes.unchanged_imports("bob", {"ep-1": "d1", "ep-4": "d4"}) == set()  # per user
    episodes.record_imports("alice", {"ep-4": "d4"}, {})  # stored now: no longer marked skipped
    assert raw_redis.hget(digests, "ep-4") == b"d4"
    assert episodes.unchanged_imports("alice", {"ep-4": "d4"}) == set()  # recorded stored, but no episode


def test_save_with_a_dream_mark_writes_it_in_the_episodes_transaction_with_its_7_day_ttl(
    episodes: EpisodeStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """The path a Redis Cluster takes (one MULTI per episode, the mark in the last one's): the user's "dream
    pending" mark is written under its own key with its token and the 7 days (604,800 s) it is kept, with the
    episode; without a mark nothing else is written."""
    mark_key = f"{key_prefix}:u:{{alice}}:dream:pending"
    episodes.save(episode(1))
    assert raw_redis.get(mark_key) is None
    episodes.save(episode(2), mark=PendingMark(mark_key, "token-2"))
    assert raw_redis.get(mark_key) == b"token-2"
    assert 604_800 - 5 <= raw_redis.ttl(mark_key) <= 604_800
    assert raw_redis.get(f"{key_prefix}:u:{{alice}}:episode:ep-2") is not None
