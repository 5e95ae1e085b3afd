"""Bookkeeping of semantic memories beside their records: each memory's change history (a Redis
list, no TTL), the memories' timeline (for listing) and the slot index (``subject|attribute`` →
memory ids, for finding the fact a later one supersedes).

Every key is under the user's prefix, so forgetting the user (``UserDirectory.delete_all``)
forgets all of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import redis

from agtos.schemas import MemoryChange
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text, members

_SEP = "\x1f"  # between a slot key and a memory id in the slot index's members


class MemoryHistory:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def _history(self, user_id: str, memory_id: str) -> str:
        return self.keys.user(user_id).record("memory-history", memory_id)

    def _timeline(self, user_id: str) -> str:
        return self.keys.user(user_id).collection("memory", "by_time")

    def _slots(self, user_id: str) -> str:
        return self.keys.user(user_id).collection("memory", "slots")

    # -- history ------------------------------------------------------------------------
    def append(self, user_id: str, changes: Iterable[MemoryChange]) -> None:
        """Append each change to its memory's history (one pipeline)."""
        changes = list(changes)
        if not changes:
            return

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for change in changes:
                pipe.rpush(self._history(user_id, change.memory_id), change.model_dump_json())
            pipe.execute()

        self.connector.run(op)

    def history(self, user_id: str, memory_id: str) -> list[MemoryChange]:
        """The memory's changes, oldest first (empty when it never existed or was forgotten)."""
        raws = self.connector.run(lambda r: r.lrange(self._history(user_id, memory_id), 0, -1))
        return [MemoryChange.model_validate_json(as_text(raw)) for raw in raws]

    def forget(self, user_id: str, memory_id: str) -> None:
        """Drop the memory's history: a deleted memory's words leave Redis."""
        self.connector.run(lambda r: r.delete(self._history(user_id, memory_id)))

    # -- timeline -----------------------------------------------------------------------
    def set_times(self, user_id: str, stamps: Mapping[str, int]) -> None:
        if stamps:
            self.connector.run(lambda r: r.zadd(self._timeline(user_id), dict(stamps)))

    def remove(self, user_id: str, memory_id: str, slots: Iterable[str] = ()) -> None:
        """Drop a memory from the timeline and the slot index."""

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            pipe.zrem(self._timeline(user_id), memory_id)
            for slot in slots:
                pipe.zrem(self._slots(user_id), f"{slot}{_SEP}{memory_id}")
            pipe.execute()

        self.connector.run(op)

    def page(self, user_id: str, offset: int, limit: int) -> tuple[list[str], int]:
        """Memory ids newest first (by ``valid_from``) from ``offset``, and how many there are."""

        def op(r: redis.Redis) -> tuple[list[bytes], int]:
            pipe = r.pipeline(transaction=False)
            pipe.zrevrange(self._timeline(user_id), offset, offset + limit - 1)
            pipe.zcard(self._timeline(user_id))
            ids, total = pipe.execute()
            return ids, int(total)

        ids, total = self.connector.run(op)
        return members(ids), total

    def timeline_ids(self, user_id: str) -> list[str]:
        return members(self.connector.run(lambda r: r.zrange(self._timeline(user_id), 0, -1)))

    # -- slot index ---------------------------------------------------------------------
    def add_slots(self, user_id: str, slots: Mapping[str, list[str]]) -> None:
        """Index memories (id → its ``subject|attribute`` keys) in a lexicographic sorted set."""
        entries = {f"{slot}{_SEP}{memory_id}": 0 for memory_id, keys in slots.items() for slot in keys}
        if entries:
            self.connector.run(lambda r: r.zadd(self._slots(user_id), entries))

    def slot_ids(self, user_id: str, slots: Iterable[str]) -> list[str]:
        """Ids of the memories indexed under any of ``slots``."""
        slots = list(slots)
        if not slots:
            return []

        def op(r: redis.Redis) -> list[list[bytes]]:
            pipe = r.pipeline(transaction=False)
            for slot in slots:
                start = f"{slot}{_SEP}".encode()
                pipe.zrangebylex(self._slots(user_id), b"[" + start, b"[" + start + b"\xff")
            return pipe.execute()

        return list(dict.fromkeys(m.split(_SEP, 1)[1] for found in self.connector.run(op) for m in members(found)))
