"""The user directory: every user with stored memory, and the removal of a user's whole key space."""

from __future__ import annotations

import redis

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, members
from agtos.storage.vector_redisearch import drop_indexes

UNLINK_BATCH = 500


class UserDirectory:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def known(self) -> list[str]:
        """Every user with stored memory, sorted (the nightly lint and the export walk them)."""
        return sorted(members(self.connector.run(lambda r: r.smembers(self.keys.users()))))

    def delete_all(self, user_id: str) -> int:
        """UNLINK every key of the user (SCAN, in batches), drop their RediSearch indexes and their
        directory entry; returns the number of keys deleted."""
        pattern = self.keys.user(user_id).all_pattern()

        def op(r: redis.Redis) -> int:
            deleted = 0
            batch: list[bytes] = []
            for key in r.scan_iter(match=pattern, count=1_000):
                batch.append(key)
                if len(batch) >= UNLINK_BATCH:
                    deleted += int(r.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(r.unlink(*batch))
            r.srem(self.keys.users(), user_id)
            return deleted

        deleted = self.connector.run(op)
        drop_indexes(self.connector, self.keys.user(user_id).base + ":")  # RediSearch indexes name the user
        return deleted
