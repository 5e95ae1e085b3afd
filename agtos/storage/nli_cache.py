"""NLI verdicts cached in Redis: hash fields with HEXPIRE on Redis ≥ 7.4, else STRING keys with EX.

The cache is per user (under the user's key space): its keys are digests of the user's texts, so
forgetting the user removes them with everything else, and forgetting a conclusion clears it.
"""

from __future__ import annotations

import json
import logging

import redis

from agtos.storage.keys import GlobalKeys, UserKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.contradiction import NLIVerdict

log = logging.getLogger(__name__)
CACHE_TTL_S = 30 * 86_400


class NLICache:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int = CACHE_TTL_S) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s
        self._field_expiry: bool | None = None

    def field_expiry_supported(self) -> bool:
        """HEXPIRE arrived in Redis 7.4; older servers (and the embedded 6.2) use STRING + EX."""
        if self._field_expiry is None:
            version = self.connector.run(lambda r: r.info("server").get("redis_version", "0"))
            major, minor = (int(x) for x in str(version).split(".")[:2])
            self._field_expiry = (major, minor) >= (7, 4)
        return self._field_expiry

    @staticmethod
    def _hash(uk: UserKeys) -> str:
        return uk.collection("nli", "cache")

    @staticmethod
    def _string(uk: UserKeys, key: str) -> str:
        return uk.record("nli", key)

    def get_many(self, user_id: str, keys: list[str]) -> dict[str, NLIVerdict]:
        if not keys:
            return {}
        uk = self.keys.user(user_id)
        if self.field_expiry_supported():
            raws = self.connector.run(lambda r: r.hmget(self._hash(uk), keys))
        else:
            raws = self.connector.run(lambda r: r.mget([self._string(uk, k) for k in keys]))
        out = {}
        for key, raw in zip(keys, raws, strict=True):
            if raw:
                data = json.loads(raw)
                out[key] = NLIVerdict(data["label"], data["scores"])
        return out

    def put_many(self, user_id: str, verdicts: dict[str, NLIVerdict]) -> None:
        if not verdicts:
            return
        uk = self.keys.user(user_id)
        payload = {k: json.dumps({"label": v.label, "scores": v.scores}) for k, v in verdicts.items()}
        field_expiry = self.field_expiry_supported()

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            if field_expiry:
                pipe.hset(self._hash(uk), items=[part for pair in payload.items() for part in pair])  # field, value…
                pipe.execute_command("HEXPIRE", self._hash(uk), self.ttl_s, "FIELDS", len(payload), *payload)
            else:
                for key, value in payload.items():
                    pipe.set(self._string(uk, key), value, ex=self.ttl_s)
            pipe.execute()

        self.connector.run(op)

    def clear(self, user_id: str) -> int:
        """Drop the user's cached verdicts (both layouts); returns keys deleted."""
        uk = self.keys.user(user_id)
        probe = self._string(uk, "x")
        pattern = probe[: -len("x")] + "*"  # ids cannot hold glob characters

        def op(r: redis.Redis) -> int:
            found = [self._hash(uk), *r.scan_iter(match=pattern, count=1_000)]
            return int(r.unlink(*found))

        return int(self.connector.run(op))
