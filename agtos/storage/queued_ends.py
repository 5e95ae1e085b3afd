"""Each user's session ends still on the ingestion queue: one sorted set under the user's keys.

``{prefix}:u:{<user>}:ends:queued`` holds the queue entry ids of the user's queued ends (score: when
queued, the entry id's ms, Redis clock), so that a read can tell whether the user has ends the worker
has not stored yet, and which, without walking the shared stream (``agtos.memory.read_catchup``). It
lives under the user's keys: forget-all and an opt-out's forget delete it with the rest. Its TTL is
the session journal's, renewed on each write.

It is an index, never the job: the end adds its entry to the stream first and only then here (on a
Redis Cluster they are different slots, two commands), so a crash between them leaves a job the worker
still finds; an id whose entry is gone (done by a worker, dropped, or dead-lettered) may linger here and
is dropped by the next catch-up that looks it up, or by the TTL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text

#: how many of a user's queued ends one catch-up looks at (oldest first)
LOOK_AT_MOST = 256


@dataclass(frozen=True)
class UserQueueState:
    """What a read needs to decide on a catch-up: the user's queued ends and whether they are quiet."""

    queued: int
    newest_ms: int | None  # when the newest queued end was queued (Redis clock, ms)
    live_sessions: int  # the user's live (unexpired) session journals


class QueuedEnds:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s

    def key(self, user_id: str) -> str:
        return f"{self.keys.user(user_id).base}:ends:queued"

    def live_key(self, user_id: str) -> str:
        """The session journal's per-user set of live sessions (member: session, score: expiry ms)."""
        return f"{self.keys.user(user_id).base}:journals:live"

    def add(self, user_id: str, entry_id: str, queued_ms: int) -> None:
        """The user's end is queued as ``entry_id`` (call after the entry is in the stream)."""
        key = self.key(user_id)

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.zadd(key, {entry_id: queued_ms})
            pipe.expire(key, self.ttl_s)
            pipe.execute()

        self.connector.run(op)

    def remove(self, user_id: str, entry_ids: list[str]) -> None:
        """These entries are done, dropped or dead-lettered: no longer the user's queued ends."""
        if entry_ids:
            key = self.key(user_id)
            self.connector.run(lambda r: r.zrem(key, *entry_ids))

    def state(self, user_id: str) -> UserQueueState:
        """The user's queued ends (how many, the newest's time) and live sessions: one round trip
        (both keys are the user's, one Cluster slot)."""
        key, live = self.key(user_id), self.live_key(user_id)
        now_ms = int(time.time() * 1000)

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.zcard(key)
            pipe.zrange(key, -1, -1, withscores=True)
            pipe.zcount(live, f"({now_ms}", "+inf")
            return list(pipe.execute())

        count, newest, live_count = self.connector.run(op)
        return UserQueueState(int(count), int(newest[0][1]) if newest else None, int(live_count))

    def oldest(self, user_id: str, limit: int = LOOK_AT_MOST) -> list[str]:
        """The user's queued entry ids, oldest first, at most ``limit``."""
        key = self.key(user_id)
        ids: list[Any] = self.connector.run(lambda r: r.zrange(key, 0, limit - 1))
        return [as_text(i) for i in ids]
