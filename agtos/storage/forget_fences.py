"""When each user last forgot everything, so work that began before it cannot bring anything back.

A session end acknowledged before a forget-all may be ingested after it (the queue), and background
work (a worker's job, the Dreamer, the vector repair, a maintenance sweep) may read a user's records
before a forget-all and write after it. Forget-all marks the user here first (Redis server time, ms),
then deletes; such work compares the time its data was taken (a queue entry's id, or the Redis clock
when it began) with the mark and drops or removes what it wrote.

One global sorted set ``{prefix}:meta:forget_fences`` (outside every user's key family, so forget-all's
SCAN does not delete it): member = a SHA-256 digest of the user id (the id itself is not kept), score =
the mark. Marks older than ``KEEP_MS`` are pruned on each mark: work older than that is not waited for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

KEEP_MS = 31 * 86_400_000  # longer than the episodic TTL (30 days): no older job is ingested


def digest(user_id: str) -> str:
    """The member naming ``user_id`` (not the id itself)."""
    return hashlib.sha256(user_id.encode()).hexdigest()[:32]


def clock_ms(r: redis.Redis) -> int:
    """The Redis server's clock in ms (the clock of stream entry ids)."""
    secs, micros = r.time()
    return int(secs) * 1000 + int(micros) // 1000


class ForgetFences:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.key = keys.meta("forget_fences")

    def now_ms(self) -> int:
        """The Redis clock now: the time a piece of work takes its data."""
        return self.connector.run(clock_ms)

    def mark(self, user_id: str) -> int:
        """Record that ``user_id`` forgets everything now (before the deletion starts); returns the mark."""

        def op(r: redis.Redis) -> int:
            at = clock_ms(r)
            pipe = r.pipeline(transaction=True)
            pipe.zadd(self.key, {digest(user_id): at})
            pipe.zremrangebyscore(self.key, "-inf", at - KEEP_MS)
            pipe.execute()
            return at

        return self.connector.run(op)

    def marks(self, user_ids: Iterable[str]) -> dict[str, int]:
        """The latest forget-all mark (ms) of each user of ``user_ids`` who has one."""
        users = list(dict.fromkeys(user_ids))
        if not users:
            return {}
        found = self.connector.run(lambda r: r.zmscore(self.key, [digest(u) for u in users]))
        return {u: int(mark) for u, mark in zip(users, found, strict=True) if mark is not None}

    def forgotten_since(self, since: Mapping[str, int]) -> set[str]:
        """The users of ``since`` (user id → ms) who forgot everything at or after their time."""
        return {u for u, mark in self.marks(since).items() if mark >= since[u]}
