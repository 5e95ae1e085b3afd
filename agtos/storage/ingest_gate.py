"""The query-as-ingest gate's per-session state: one Redis hash (``count``, ``last_saved_at``) per
session, admitted by a Lua script so several API processes share the limits and two concurrent
responses cannot both pass."""

from __future__ import annotations

import redis

from agtos.storage.keys import GlobalKeys, check_record_id, check_user_id
from agtos.storage.redis_conn import RedisConnector

KEY_KIND = "qai"

# KEYS[1] = session hash; ARGV = now, window_s, cap, ttl_s.
# Refuses at the cap, then inside the window; otherwise counts the ingest and stamps the time.
_ADMIT_LUA = """
local count = tonumber(redis.call('HGET', KEYS[1], 'count') or '0')
if count >= tonumber(ARGV[3]) then return {'session-cap', count} end
local last = redis.call('HGET', KEYS[1], 'last_saved_at')
if last and (tonumber(ARGV[1]) - tonumber(last)) < tonumber(ARGV[2]) then
  return {'dedup-window', count}
end
count = redis.call('HINCRBY', KEYS[1], 'count', 1)
redis.call('HSET', KEYS[1], 'last_saved_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return {'ingest', count}
"""


class IngestGateStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = max(1, int(ttl_s))

    def session_key(self, user_id: str, session_id: str) -> str:
        return self.keys.user(check_user_id(user_id)).record(KEY_KIND, check_record_id(session_id, "session id"))

    def admit(self, key: str, now: float, window_s: float, cap: int) -> tuple[str, int]:
        """``(reason, count)``: ``ingest`` (counted and stamped), ``session-cap`` or ``dedup-window``."""
        args = (now, window_s, cap, self.ttl_s)
        reason, count = self.connector.run(lambda r: r.eval(_ADMIT_LUA, 1, key, *(repr(a) for a in args)))
        return (reason.decode() if isinstance(reason, bytes) else str(reason)), int(count)

    def mark_saved(self, key: str, now: float) -> None:
        """Stamp the session's last save (opens the dedup window) and renew the TTL."""
        ttl = self.ttl_s

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.hset(key, "last_saved_at", repr(now))
            pipe.expire(key, ttl)
            pipe.execute()

        self.connector.run(op)

    def count(self, key: str) -> int:
        raw = self.connector.run(lambda r: r.hget(key, "count"))
        return int(raw) if raw else 0

    def reset(self, key: str) -> None:
        self.connector.run(lambda r: r.delete(key))
