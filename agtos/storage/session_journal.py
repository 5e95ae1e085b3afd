"""The session journal: each live session's turns as one Redis list, so a restart or another API
worker continues the session where it stopped. Errors surface as ``StorageUnavailable``."""

from __future__ import annotations

import redis

from agtos.schemas import Turn
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

MAX_TURNS = 5_000  # the list keeps the newest turns only


class SessionJournal:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s

    def _key(self, user_id: str, session_id: str) -> str:
        return self.keys.user(user_id).session_turns(session_id)

    def append(self, user_id: str, session_id: str, turn: Turn) -> None:
        """Append a turn, keep the newest ``MAX_TURNS`` and renew the TTL (one MULTI/EXEC)."""
        key, ttl = self._key(user_id, session_id), self.ttl_s

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.rpush(key, turn.model_dump_json())
            pipe.ltrim(key, -MAX_TURNS, -1)
            pipe.expire(key, ttl)
            pipe.execute()

        self.connector.run(op)

    def turns(self, user_id: str, session_id: str) -> list[Turn]:
        key = self._key(user_id, session_id)
        raws = self.connector.run(lambda r: r.lrange(key, 0, -1))
        return [Turn.model_validate_json(raw) for raw in raws]

    def clear(self, user_id: str, session_id: str) -> None:
        key = self._key(user_id, session_id)
        self.connector.run(lambda r: r.delete(key))
