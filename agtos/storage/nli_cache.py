"""NLI verdicts cached in Redis: hash fields with HEXPIRE on Redis ≥ 7.4, else STRING keys with EX."""

from __future__ import annotations

import json
import logging

import redis

from agtos.storage.keys import GlobalKeys
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

    def _hash(self) -> str:
        return self.keys.meta("nli-cache")

    def _string(self, key: str) -> str:
        return self.keys.meta(f"nli:{key}")

    def get_many(self, keys: list[str]) -> dict[str, NLIVerdict]:
        if not keys:
            return {}
        if self.field_expiry_supported():
            raws = self.connector.run(lambda r: r.hmget(self._hash(), keys))
        else:
            raws = self.connector.run(lambda r: r.mget([self._string(k) for k in keys]))
        out = {}
        for key, raw in zip(keys, raws, strict=True):
            if raw:
                data = json.loads(raw)
                out[key] = NLIVerdict(data["label"], data["scores"])
        return out

    def put_many(self, verdicts: dict[str, NLIVerdict]) -> None:
        if not verdicts:
            return
        payload = {k: json.dumps({"label": v.label, "scores": v.scores}) for k, v in verdicts.items()}
        field_expiry = self.field_expiry_supported()

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            if field_expiry:
                pipe.hset(self._hash(), mapping=payload)
                pipe.execute_command("HEXPIRE", self._hash(), self.ttl_s, "FIELDS", len(payload), *payload)
            else:
                for key, value in payload.items():
                    pipe.set(self._string(key), value, ex=self.ttl_s)
            pipe.execute()

        self.connector.run(op)
