"""Who opted out of persistence: one global set outside every user's key space."""

from __future__ import annotations

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector


class OptOutStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.key = keys.meta("privacy:opt-out")

    def contains(self, user_id: str) -> bool:
        return bool(self.connector.run(lambda r: r.sismember(self.key, user_id)))

    def set(self, user_id: str, opted_out: bool) -> None:
        self.connector.run(lambda r: r.sadd(self.key, user_id) if opted_out else r.srem(self.key, user_id))
