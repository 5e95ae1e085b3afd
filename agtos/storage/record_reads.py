"""Batch reads of stored records by key scan or id list: the export's memories and the entity
views' episodes (the stores read one namespace through their indexes; these read raw keys)."""

from __future__ import annotations

import re

import redis

from agtos.schemas import Episode, Memory
from agtos.storage.keys import GlobalKeys, record_id_pattern
from agtos.storage.redis_conn import RedisConnector

_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


class RecordReads:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def memory_keys(self, user_id: str) -> list[str]:
        """Record keys of the user's semantic memories (SCAN; index and collection keys skipped)."""
        uk = self.keys.user(user_id)
        probe = uk.record("memory", "x")
        prefix = probe[: -len("x")]  # the record key layout stays in agtos.storage.keys
        if not prefix.startswith(uk.base):
            raise RuntimeError(f"unexpected memory record key layout: {probe!r}")
        pattern = _GLOB_SPECIAL.sub(r"\\\1", prefix) + "*"

        def scan(r: redis.Redis) -> list[str]:
            return [k.decode() for k in r.scan_iter(match=pattern, count=1_000)]

        ids = (k[len(prefix) :] for k in self.connector.run(scan))
        return sorted(prefix + i for i in ids if record_id_pattern().fullmatch(i) and not i.startswith("_"))

    def memories(self, user_id: str, keys: list[str]) -> list[Memory]:
        """The memories stored at ``keys`` that belong to ``user_id`` (one MGET)."""
        raws = self.connector.run(lambda r: r.mget(keys))
        memories = [Memory.model_validate_json(raw) for raw in raws if raw is not None]
        return [m for m in memories if m.user_id == user_id]

    def episodes(self, user_id: str, ids: list[str]) -> list[Episode]:
        """The user's episodes among ``ids`` that still exist, in ``ids`` order (one MGET)."""
        uk = self.keys.user(user_id)
        raws = self.connector.run(lambda r: r.mget([uk.episode(i) for i in ids]))
        return [Episode.model_validate_json(raw) for raw in raws if raw]
