"""Per-key token buckets in Redis: one Lua script takes a token atomically, on the server's clock.

Each bucket is a hash ``{prefix}:{auth}:bucket:<id>`` with ``tokens`` and ``ts`` (ms). It refills
at ``rate`` tokens per second up to ``burst`` and expires once it would be full again, so idle
keys leave nothing behind. Every API process shares the buckets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector

#: takes a token from the bucket ``bucket`` at ``rate`` tokens/s up to ``burst``: sets ``allowed`` (0/1) and
#: ``wait_ms`` (ms until a token is there); shared by :data:`TAKE_TOKEN` and the key check's one round trip
#: (:mod:`agtos.storage.api_keys`)
TOKEN_BUCKET_LUA = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local state = redis.call('HMGET', bucket, 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local allowed = 0
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', bucket, 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', bucket, math.ceil((burst - tokens) * 1000 / rate) + 1000)
"""

# KEYS[1] bucket; ARGV rate (tokens/s), burst. Returns {allowed (0/1), ms until a token is there}.
TAKE_TOKEN = (
    "local bucket, rate, burst = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    + TOKEN_BUCKET_LUA
    + "return {allowed, wait_ms}\n"
)


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after_s: int  # whole seconds until a request would be allowed (0 when allowed)


class RateLimiter:
    """``rate`` requests per second per key, bursts up to ``burst``; ``rate`` 0 switches it off."""

    def __init__(self, connector: RedisConnector, keys: GlobalKeys, rate: float, burst: int) -> None:
        self.connector = connector
        self.prefix = f"{keys.prefix}:{{auth}}:bucket:"
        self.rate = rate
        self.burst = burst
        self._script: Script | None = None

    def take(self, bucket: str) -> RateDecision:
        """Take one token from ``bucket`` (a key id)."""
        if self.rate <= 0:
            return RateDecision(True, 0)

        def run(r: redis.Redis) -> Any:
            if self._script is None:
                self._script = r.register_script(TAKE_TOKEN)
            return self._script(keys=[self.bucket_key(bucket)], args=[self.rate, self.burst], client=r)

        allowed, wait_ms = self.connector.run(run)
        return decision(allowed, wait_ms)

    def bucket_key(self, bucket: str) -> str:
        """The Redis key of ``bucket``'s token bucket (a key id)."""
        return self.prefix + bucket


def decision(allowed: Any, wait_ms: Any) -> RateDecision:
    """What the token bucket script answered, as a decision (whole seconds to wait, at least 1)."""
    return RateDecision(bool(int(allowed)), 0 if int(allowed) else max(1, math.ceil(int(wait_ms) / 1000)))
