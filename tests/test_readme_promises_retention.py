"""README: "Episodes expire after ``AGTOS_EPISODE_TTL_DAYS`` (30)". An episode's verbatim turns are kept
with it (search's highlights quote them), so they must not outlive it: with the variable set, every
stored key of a session end that holds the words said (the episode, its turns) and the user's episode
timeline expire within the configured days, not the default 30. Other tests check the episode's own
key only. Through HTTP, TTLs read from Redis; the expected seconds are the README's days x 86,400.
"""

from __future__ import annotations

import redis

from tests import test_env_settings
from tests.helpers import talk, user_key_names
from tests.test_env_settings import Serve

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

MARK = b"zorblax"  # a word only this conversation says


def test_an_episodes_turns_expire_with_it(serve: Serve, raw_redis: redis.Redis, key_prefix: str) -> None:
    with serve(AGTOS_EPISODE_TTL_DAYS="2") as client:
        ended = talk(
            client,
            "dave",
            "ttl",
            ("user", "I keep my zorblax collection in the attic, remember that."),
            ("assistant", "Noted, the zorblax collection lives in the attic."),
        )
    episode = ended["episode"]["id"]
    names = user_key_names(raw_redis, key_prefix, "dave")
    records = {n for n in names if n.endswith(f":episode:{episode}") or n.endswith(f":turns:{episode}")}
    assert len(records) == 2, names  # the episode and its turns
    for name in records:
        assert MARK in (raw_redis.dump(name) or b""), name
    for name in records | {f"{key_prefix}:u:{{dave}}:episodes:by_time"}:
        assert 2 * 86_400 - 60 < raw_redis.ttl(name) <= 2 * 86_400, name
