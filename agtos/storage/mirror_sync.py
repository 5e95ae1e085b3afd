"""Keeping in-process mirrors of a Redis-held index fresh, for every API process.

An index that is searched in process (vectors, BM25) keeps its truth in Redis plus a
small versioned change log next to it:

* ``meta``     hash ``epoch`` (random id of this index's life), ``ver`` (INCR on every
  write), ``floor`` (changes at or below this version were trimmed from the log)
* ``changes``  sorted set ``doc_id -> version of its last write`` (capped)

Write scripts are built from :data:`LOG_BEGIN_LUA` / :data:`LOG_END_LUA` (``KEYS[1]`` meta,
``KEYS[2]`` changes, ``ARGV[2]`` epoch candidate, ``ARGV[3]`` log cap; the body logs each
document with ``ZADD KEYS[2] v id``). Before a search, :func:`plan_sync` compares a mirror's
epoch/version with Redis in one round trip and says whether it is fresh, which documents to
re-read, or that it must be reloaded. All keys of one index share the user's hash tag, so
the scripts stay valid on Redis Cluster.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import redis

from agtos.storage.redis_conn import RedisConnector

LOG_BEGIN_LUA = """
redis.call('HSETNX', KEYS[1], 'epoch', ARGV[2])
local v = redis.call('HINCRBY', KEYS[1], 'ver', 1)
"""

LOG_END_LUA = """
local cap = tonumber(ARGV[3])
local n = redis.call('ZCARD', KEYS[2])
if n > cap then
  local cut = redis.call('ZRANGE', KEYS[2], n - cap - 1, n - cap - 1, 'WITHSCORES')
  redis.call('HSET', KEYS[1], 'floor', cut[2])
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - cap - 1)
end
"""


class Mirror(Protocol):
    """What sync needs of a mirror: whether it holds data, and of which life and version."""

    loaded: bool
    epoch: bytes | None
    version: int


@dataclass(frozen=True)
class SyncPlan:
    """``fresh``: nothing to do; ``apply``: re-read ``changed_ids``; ``reload``: read everything."""

    action: Literal["fresh", "apply", "reload"]
    epoch: bytes | None
    version: int
    changed_ids: list[str] = field(default_factory=list)


def plan_sync(connector: RedisConnector, meta_key: str, changes_key: str, mirror: Mirror) -> SyncPlan:
    """Compare ``mirror`` with Redis (one round trip, one consistent snapshot)."""
    loaded, since = mirror.loaded, mirror.version

    def check(r: redis.Redis) -> list[Any]:
        pipe = r.pipeline(transaction=True)
        pipe.hmget(meta_key, ["epoch", "ver", "floor"])
        if loaded:  # the change log since our version
            pipe.zrangebyscore(changes_key, f"({since}", "+inf")
        return [*pipe.execute(), []]

    (epoch, ver, floor), changed, *_ = connector.run(check)
    version, floor_version = int(ver or 0), int(floor or 0)
    same_life = loaded and epoch == mirror.epoch
    if same_life and version == since:
        return SyncPlan("fresh", epoch, version)
    if same_life and floor_version <= since < version:
        return SyncPlan("apply", epoch, version, [c.decode() for c in changed])
    return SyncPlan("reload", epoch, version)


def advance_after_own_write(mirror: Mirror, version: int, epoch: bytes) -> None:
    """After applying this process's own write: move to ``version`` only when nobody else
    wrote in between (otherwise the next :func:`plan_sync` replays the gap)."""
    if mirror.version == version - 1 and mirror.epoch in (None, epoch):
        mirror.version, mirror.epoch = version, epoch


M = TypeVar("M")


class MirrorRegistry(Generic[M]):
    """Per-user mirrors, least recently used dropped beyond ``max_users`` (reloaded on next use)."""

    def __init__(self, factory: Callable[[], M], max_users: int) -> None:
        self._factory = factory
        self.max_users = max(1, max_users)
        self._mirrors: OrderedDict[str, M] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: str) -> M:
        """The user's mirror, created empty when absent."""
        with self._lock:
            mirror = self._mirrors.get(user_id)
            if mirror is None:
                mirror = self._mirrors[user_id] = self._factory()
                while len(self._mirrors) > self.max_users:
                    self._mirrors.popitem(last=False)
            else:
                self._mirrors.move_to_end(user_id)
            return mirror

    def peek(self, user_id: str) -> M | None:
        """The user's mirror if one is held (no LRU update, nothing created)."""
        return self._mirrors.get(user_id)

    def values(self) -> list[M]:
        with self._lock:
            return list(self._mirrors.values())
