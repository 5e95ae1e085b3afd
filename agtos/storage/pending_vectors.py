"""Records stored without vectors (the embedder failed at ingestion), waiting for them.

Per user, a sorted set ``{prefix}:u:{<user>}:vectors:_pending`` (:meth:`UserKeys.collection`): under
the user's key family and hash tag, so forget-all's SCAN removes it with the records and it shares
their Redis Cluster slot. A member is ``{namespace}:{record id}`` (``episode``: the episode and the
units of its stored turns; ``memory``; ``conclusion``; ``entity``: the entity's name vector, dedup by
similarity), its score the time it was added (ms); at most ``limit`` per
user, the oldest dropped beyond (those records stay keyword-only, the log says how many). The global
set ``{prefix}:meta:pending_vectors`` names the users that have any, so a worker finds them without
walking every user; forget-all removes the user from it (:meth:`PendingVectors.forget_user`). A record
deleted or forgotten loses its note at once (:meth:`PendingVectors.forget`, from ``SemanticStore.delete``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from agtos.storage.keys import GlobalKeys, check_record_id
from agtos.storage.redis_conn import RedisConnector, as_text, members

log = logging.getLogger(__name__)

PENDING_PER_USER = 10_000
PENDING_NAMESPACES = ("episode", "memory", "conclusion", "entity")

#: KEYS[1]: a user's pending set; ARGV: member, score, member, score... Removes each member still
#: at that score (one added again meanwhile, by a later failure, stays); returns {removed, left}.
_CLEAR_LUA = """
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return {removed, redis.call('ZCARD', KEYS[1])}
"""


#: KEYS[1]: a user's pending set, then each record's key; ARGV: the score (ms), the limit, '1' to note
#: only the records still stored ('0': all), then each record's member. Drops the oldest beyond the
#: limit; returns {noted, dropped}. A record deleted before this step gets no note (its delete found
#: none to drop).
_ADD_LUA = """
local noted = 0
for i = 2, #KEYS do
  if ARGV[3] == '0' or redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i + 2])
    noted = noted + 1
  end
end
return {noted, redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[2]) + 1))}
"""


@dataclass(frozen=True)
class PendingRecord:
    """One record waiting for its vector (``added_ms``: when it was noted, the sorted set's score)."""

    namespace: str
    record_id: str
    added_ms: int

    @property
    def member(self) -> str:
        return f"{self.namespace}:{self.record_id}"


class PendingVectors:
    """The per-user sets of records without vectors and the global list of their users."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, limit: int = PENDING_PER_USER) -> None:
        self.connector = connector
        self.keys = keys
        self.limit = max(1, limit)

    def key(self, user_id: str) -> str:
        return self.keys.user(user_id).collection("vectors", "pending")

    def _users_key(self) -> str:
        return self.keys.meta("pending_vectors")

    def add(self, user_id: str, records: Sequence[tuple[str, str]], at_ms: int, stored: bool = False) -> int:
        """Note ``(namespace, record id)`` pairs of one user as waiting since ``at_ms``; returns how many
        older ones were dropped to stay within ``limit``. ``stored``: only those whose record is stored
        (checked in the same atomic step: a delete landing between a record's write and its note left
        the note naming a deleted record, that no delete would drop)."""
        if not records:
            return 0
        for namespace, record_id in records:
            if namespace not in PENDING_NAMESPACES:
                raise ValueError(f"pending namespace must be one of {PENDING_NAMESPACES}, not {namespace!r}")
            check_record_id(record_id, f"{namespace} id")
        uk = self.keys.user(user_id)
        keys = [self.key(user_id), *(uk.record(ns, rid) for ns, rid in records)]
        args: list[str | int] = [at_ms, self.limit, int(stored), *(f"{ns}:{rid}" for ns, rid in records)]

        def op(r: redis.Redis) -> int:
            noted, dropped = r.eval(_ADD_LUA, len(keys), *keys, *args)
            if noted:
                r.sadd(self._users_key(), user_id)  # a global key: outside the per-user script
            return int(dropped)

        dropped = self.connector.run(op)
        if dropped:
            log.warning("%d records of one user dropped from the pending vectors (limit %d)", dropped, self.limit)
        return dropped

    def add_of_users(
        self, namespace: str, records: Sequence[tuple[str, str]], at_ms: int, stored: bool = False
    ) -> None:
        """Note ``(user id, record id)`` pairs of one namespace, any users, as waiting since ``at_ms``
        (``stored``: as :meth:`add`)."""
        by_user: dict[str, list[tuple[str, str]]] = {}
        for user_id, record_id in records:
            by_user.setdefault(user_id, []).append((namespace, record_id))
        for user_id, pairs in by_user.items():
            self.add(user_id, pairs, at_ms, stored)

    def users(self, count: int) -> list[str]:
        """Up to ``count`` users with records waiting (a random pick of them: none starves the rest)."""
        picked: list[Any] = self.connector.run(lambda r: r.srandmember(self._users_key(), count))  # type: ignore[arg-type,return-value]
        return members(picked)

    def oldest(self, user_id: str, count: int) -> list[PendingRecord]:
        """The user's ``count`` records that waited longest."""
        rows: list[tuple[bytes, float]] = self.connector.run(
            lambda r: r.zrange(self.key(user_id), 0, count - 1, withscores=True)  # type: ignore[arg-type,return-value]
        )
        out: list[PendingRecord] = []
        for member, score in rows:
            namespace, _, record_id = as_text(member).partition(":")
            out.append(PendingRecord(namespace, record_id, int(score)))
        return out

    def clear(self, user_id: str, records: Sequence[PendingRecord]) -> int:
        """Remove these records (those not noted again since), and the user from the global list once
        none is left; returns how many are left."""
        if not records:
            return self.count_of(user_id)
        key = self.key(user_id)
        args = [str(part) for rec in records for part in (rec.member, rec.added_ms)]

        def op(r: redis.Redis) -> int:
            _, left = r.eval(_CLEAR_LUA, 1, key, *args)
            if not left:
                r.srem(self._users_key(), user_id)
                if r.zcard(key):  # noted meanwhile by another process: listed again
                    r.sadd(self._users_key(), user_id)
            return int(left)

        return self.connector.run(op)

    def forget(self, user_id: str, namespace: str, record_id: str) -> None:
        """Drop the note of a deleted record (none kept for other namespaces), and the user from the
        global list once none is left: a forgotten record's id stays nowhere (the repair would skip it)."""
        if namespace not in PENDING_NAMESPACES:
            return
        key = self.key(user_id)

        def op(r: redis.Redis) -> None:
            if r.zrem(key, f"{namespace}:{record_id}") and not r.zcard(key):
                r.srem(self._users_key(), user_id)
                if r.zcard(key):  # noted meanwhile by another process: listed again
                    r.sadd(self._users_key(), user_id)

        self.connector.run(op)

    def count_of(self, user_id: str) -> int:
        return int(self.connector.run(lambda r: r.zcard(self.key(user_id))))

    def count(self) -> int:
        """Records waiting, all users together (one round trip after the list of users)."""
        users = members(self.connector.run(lambda r: r.smembers(self._users_key())))
        if not users:
            return 0

        def op(r: redis.Redis) -> list[int]:
            pipe = r.pipeline(transaction=False)
            for user_id in users:
                pipe.zcard(self.key(user_id))
            return pipe.execute()

        return sum(int(n) for n in self.connector.run(op))

    def drop_user(self, user_id: str) -> None:
        """Drop every record of the user waiting and the user from the global list (an opted-out user:
        nothing more is written for them)."""

        def op(r: redis.Redis) -> None:
            r.delete(self.key(user_id))
            r.srem(self._users_key(), user_id)

        self.connector.run(op)

    def forget_user(self, user_id: str) -> None:
        """Drop the user from the global list (forget-all: their set goes with their keys)."""
        self.connector.run(lambda r: r.srem(self._users_key(), user_id))
