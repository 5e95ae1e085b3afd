"""Conclusions in Redis: JSON records (no TTL), a per-user timeline, and the semantic index."""

from __future__ import annotations

import numpy as np
import redis

from agtos.schemas import Conclusion
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, members
from agtos.storage.semantic_store import SemanticStore


class ConclusionStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, index: SemanticStore) -> None:
        self.connector = connector
        self.keys = keys
        self.index = index

    def _timeline(self, user_id: str) -> str:
        return self.keys.user(user_id).collection("conclusion", "by_time")

    def upsert_many(self, conclusions: list[Conclusion], vectors: np.ndarray | None) -> None:
        """Write records and timeline, then index text (and vectors when given), batched per user."""
        rows: dict[str, list[int]] = {}
        for row, conclusion in enumerate(conclusions):
            rows.setdefault(conclusion.user_id, []).append(row)
        for user_id, idx in rows.items():
            docs = [(conclusions[i].id, conclusions[i].text, conclusions[i].model_dump_json()) for i in idx]
            self.index.upsert_many(user_id, docs, None if vectors is None else vectors[idx])
            self._set_times(user_id, {conclusions[i].id: conclusions[i].updated_at for i in idx})

    def _set_times(self, user_id: str, stamps: dict[str, int]) -> None:
        self.connector.run(lambda r: r.zadd(self._timeline(user_id), stamps))

    def save_records(self, conclusions: list[Conclusion]) -> None:
        """Rewrite records whose text did not change (confidence, stale flag, sources): no re-indexing."""

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            for c in conclusions:
                pipe.set(self.keys.user(c.user_id).record("conclusion", c.id), c.model_dump_json())
                pipe.zadd(self._timeline(c.user_id), {c.id: c.updated_at})
            pipe.execute()

        if conclusions:
            self.connector.run(op)

    def get_many(self, user_id: str, ids: list[str]) -> dict[str, Conclusion]:
        return {i: Conclusion.model_validate_json(raw) for i, raw in self.index.get_many(user_id, ids).items()}

    def get(self, user_id: str, conclusion_id: str) -> Conclusion | None:
        return self.get_many(user_id, [conclusion_id]).get(conclusion_id)

    def all(self, user_id: str) -> list[Conclusion]:
        """Newest written first (the timeline's time: one Dreamer run writes all it found at one time), then
        the more confident; equal in both, the timeline's own order (by id, descending)."""
        timeline: list[tuple[bytes, float]] = self.connector.run(
            lambda r: r.zrevrange(self._timeline(user_id), 0, -1, withscores=True)  # type: ignore[arg-type,return-value]
        )
        ids = members(member for member, _ in timeline)
        found = self.get_many(user_id, ids)
        stored = [(score, found[i]) for i, (_, score) in zip(ids, timeline, strict=True) if i in found]
        return [c for _, c in sorted(stored, key=lambda pair: (-pair[0], -pair[1].confidence))]

    def recent(self, user_id: str, limit: int, kind: str | None = None) -> list[Conclusion]:
        items = self.all(user_id)
        return [c for c in items if kind in (None, c.type)][:limit]

    def delete(self, user_id: str, conclusion_id: str) -> bool:
        existed = self.index.delete(user_id, conclusion_id)

        def op(r: redis.Redis) -> int:
            return int(r.zrem(self._timeline(user_id), conclusion_id))

        return bool(self.connector.run(op)) or existed
