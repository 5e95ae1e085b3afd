"""Key layout and id validation: every key name written out literally, and SCAN isolation on a real Redis."""

from __future__ import annotations

import pytest
import redis

from agtos.storage.index_keys import check_namespace, index_key
from agtos.storage.keys import GlobalKeys, InvalidIdentifier, UserKeys, check_record_id, check_user_id


def test_global_and_user_key_names() -> None:
    keys = GlobalKeys("pfx")
    assert keys.users() == "pfx:users"
    assert keys.meta("privacy:opt-out") == "pfx:meta:privacy:opt-out"
    uk = keys.user("alice")
    assert uk == UserKeys("pfx", "alice")
    assert uk.base == "pfx:u:{alice}"
    assert uk.all_pattern() == "pfx:u:{alice}:*"
    assert uk.episode("ep-1") == "pfx:u:{alice}:episode:ep-1"
    assert uk.episode_timeline() == "pfx:u:{alice}:episodes:by_time"
    assert uk.session_turns("s1") == "pfx:u:{alice}:session:s1:turns"
    assert uk.session_ended("s1") == "pfx:u:{alice}:session:s1:ended"
    assert uk.episode_turns("ep-1") == "pfx:u:{alice}:turns:ep-1"
    assert uk.active_sessions() == "pfx:u:{alice}:sessions:active"
    assert uk.profile() == "pfx:u:{alice}:profile"
    assert uk.record("memory", "m.1") == "pfx:u:{alice}:memory:m.1"
    assert uk.collection("memory", "idx:bm25:len") == "pfx:u:{alice}:memory:_idx:bm25:len"
    assert index_key(keys, "alice", "memory", "bm25:len") == "pfx:u:{alice}:memory:_idx:bm25:len"
    assert check_namespace("conclusion") == "conclusion"


@pytest.mark.parametrize("user_id", ["a", "A_z-0.9@x", "x" * 128, ".a", "a.", "..a", "user@example.com"])
def test_valid_user_ids(user_id: str) -> None:
    assert check_user_id(user_id) == user_id
    assert GlobalKeys("p").user(user_id).user_id == user_id


@pytest.mark.parametrize(
    "user_id", ["", ".", "..", "...", "x" * 129, "a:b", "a*", "a b", "{a}", "a\n", "é", "a/b", "a?", "[a]"]
)
def test_invalid_user_ids(user_id: str) -> None:
    with pytest.raises(InvalidIdentifier, match=r"^user id must be 1-128 characters .* \(and not only dots\)"):
        check_user_id(user_id)
    with pytest.raises(InvalidIdentifier):
        GlobalKeys("p").user(user_id)


def test_none_user_id_is_rejected_not_crashing() -> None:
    with pytest.raises(InvalidIdentifier):
        check_user_id(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidIdentifier):
        check_record_id(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("record_id", ["e", "ep-1", "a_b.c", "x" * 128, ".a", "a..", "9"])
def test_valid_record_ids(record_id: str) -> None:
    assert check_record_id(record_id) == record_id


@pytest.mark.parametrize("record_id", ["", "x" * 129, "a@b", "a:b", "a*", "a b", "{a}", "a\n", "a/b", ".", ".."])
def test_invalid_record_ids_name_what_was_wrong(record_id: str) -> None:
    # only dots (H3): a path segment, which clients and browsers normalise away
    with pytest.raises(
        InvalidIdentifier, match=r"^id must be 1-128 characters of letters, digits, '_', '\.' or '-' \(not only dots\)$"
    ):
        check_record_id(record_id)
    uk = GlobalKeys("p").user("alice")
    with pytest.raises(InvalidIdentifier, match=r"^episode id must"):
        uk.episode(record_id)
    with pytest.raises(InvalidIdentifier, match=r"^episode id must"):
        uk.episode_turns(record_id)
    with pytest.raises(InvalidIdentifier, match=r"^session id must"):
        uk.session_turns(record_id)
    with pytest.raises(InvalidIdentifier, match=r"^session id must"):
        uk.session_ended(record_id)
    with pytest.raises(InvalidIdentifier, match=r"^memory id must"):
        uk.record("memory", record_id)
    with pytest.raises(InvalidIdentifier, match=r"^index namespace must"):
        check_namespace(record_id)


def test_a_users_scan_pattern_never_matches_another_users_keys(raw_redis: redis.Redis, key_prefix: str) -> None:
    """Ids that are prefixes of each other or contain separators-like characters stay apart in SCAN."""
    keys = GlobalKeys(key_prefix)
    users = ["al", "alice", "al.ice", "al-", "al_", "al@x", "a"]
    for u in users:
        uk = keys.user(u)
        raw_redis.set(uk.episode("e1"), u)
        raw_redis.set(uk.record("memory", "m1"), u)
        raw_redis.set(index_key(keys, u, "memory", "bm25:len"), u)
    raw_redis.set(keys.users(), "global")
    for u in users:
        found = {k.decode() for k in raw_redis.scan_iter(match=keys.user(u).all_pattern(), count=1000)}
        assert found == {
            f"{key_prefix}:u:{{{u}}}:episode:e1",
            f"{key_prefix}:u:{{{u}}}:memory:m1",
            f"{key_prefix}:u:{{{u}}}:memory:_idx:bm25:len",
        }
        assert {raw_redis.get(k).decode() for k in found} == {u}
