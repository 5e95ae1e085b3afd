"""The session journal: each live session's turns as one Redis list, so a restart or another API
worker continues the session where it stopped. Errors surface as ``StorageUnavailable``.

A journal is never trimmed: an append that would pass a cap (turns or bytes of the session, live
sessions or journalled turns of the user) is refused whole with :class:`JournalFull`. Beside the
lists, three keys per user count what the caps need (expired journals drop out of them):
``journals:live`` (session → expiry, ms), ``journals:turns`` and ``journals:bytes`` (session → count).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

from agtos.schemas import Turn
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_bytes


@dataclass(frozen=True)
class JournalLimits:
    """Caps of the journals (0: no cap)."""

    turns_per_session: int = 5_000
    bytes_per_session: int = 8 * 1024 * 1024
    sessions_per_user: int = 100
    turns_per_user: int = 20_000


class JournalFull(Exception):
    """An append would pass a journal cap; nothing of it was written."""


@dataclass(frozen=True)
class Appended:
    """What an append left: the journal's length and the entries before the new turns that the
    caller had not seen (from its ``seen`` index on; all of them when ``reset``: the journal is
    shorter than the caller thought, so it was ended or expired meanwhile)."""

    length: int
    reset: bool
    unseen: list[Turn]


# KEYS: list, live (zset), turns (hash), bytes (hash)
# ARGV: session, now ms, ttl s, seen, max turns, max bytes, max sessions, max user turns, turn...
_APPEND_LUA = """
local list, live, nturns, nbytes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sid, now, ttl, seen = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_turns, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6])
local max_sessions, max_user_turns = tonumber(ARGV[7]), tonumber(ARGV[8])
local gone = redis.call('ZRANGEBYSCORE', live, '-inf', now)
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', live, '-inf', now)
  redis.call('HDEL', nturns, unpack(gone))
  redis.call('HDEL', nbytes, unpack(gone))
end
local old = redis.call('LLEN', list)
if old == 0 then
  redis.call('HDEL', nturns, sid)
  redis.call('HDEL', nbytes, sid)
end
local k, add = #ARGV - 8, 0
for i = 9, #ARGV do add = add + #ARGV[i] end
local bytes = tonumber(redis.call('HGET', nbytes, sid) or '0')
if max_turns > 0 and old + k > max_turns then return {-1, old} end
if max_bytes > 0 and bytes + add > max_bytes then return {-2, bytes} end
local live_now = redis.call('ZCARD', live)
if max_sessions > 0 and not redis.call('ZSCORE', live, sid) and live_now >= max_sessions then
  return {-3, live_now}
end
if max_user_turns > 0 then
  local total = 0
  for _, n in ipairs(redis.call('HVALS', nturns)) do total = total + tonumber(n) end
  if total + k > max_user_turns then return {-4, total} end
end
redis.call('RPUSH', list, unpack(ARGV, 9))
redis.call('EXPIRE', list, ttl)
redis.call('ZADD', live, now + ttl * 1000, sid)
redis.call('HINCRBY', nturns, sid, k)
redis.call('HINCRBY', nbytes, sid, add)
for _, key in ipairs({live, nturns, nbytes}) do redis.call('EXPIRE', key, ttl) end
local reset = seen > old
local first = reset and 0 or seen
local out = {old + k, reset and 1 or 0}
if first < old then
  for _, raw in ipairs(redis.call('LRANGE', list, first, old - 1)) do out[#out + 1] = raw end
end
return out
"""


class SessionJournal:
    def __init__(
        self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int, limits: JournalLimits | None = None
    ) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s
        self.limits = limits or JournalLimits()
        self._script: Script | None = None

    def _key(self, user_id: str, session_id: str) -> str:
        return self.keys.user(user_id).session_turns(session_id)

    def _index_keys(self, user_id: str) -> list[str]:
        base = self.keys.user(user_id).base
        return [f"{base}:journals:{part}" for part in ("live", "turns", "bytes")]

    def append(self, user_id: str, session_id: str, turns: list[Turn] | Turn, seen: int = 0) -> Appended:
        """Append the turns all or none and renew the TTL; ``JournalFull`` past a cap.

        ``seen`` is how many entries the caller already holds: the reply carries the others."""
        batch = [turns] if isinstance(turns, Turn) else turns
        lim = self.limits
        keys = [self._key(user_id, session_id), *self._index_keys(user_id)]
        args: list[str | int] = [
            session_id,
            int(time.time() * 1000),
            self.ttl_s,
            seen,
            lim.turns_per_session,
            lim.bytes_per_session,
            lim.sessions_per_user,
            lim.turns_per_user,
            *(t.model_dump_json() for t in batch),
        ]

        def op(r: redis.Redis) -> list[Any]:
            if self._script is None:
                self._script = r.register_script(_APPEND_LUA)
            return list(self._script(keys=keys, args=args, client=r))

        reply = self.connector.run(op)
        code = int(reply[0])
        if code < 0:
            raise JournalFull(self._refusal(code, int(reply[1]), len(batch)))
        unseen = [Turn.model_validate_json(as_bytes(raw)) for raw in reply[2:]]
        return Appended(length=code, reset=bool(int(reply[1])), unseen=unseen)

    def _refusal(self, code: int, current: int, adding: int) -> str:
        lim = self.limits
        end_hint = "end the session (POST …/end) and continue in a new one"
        return {
            -1: f"session journal full: {current} turns journalled, {adding} more would pass the cap of "
            f"{lim.turns_per_session} turns per session (AGTOS_SESSION_MAX_TURNS); {end_hint}",
            -2: f"session journal full: {current} bytes journalled, these turns would pass the cap of "
            f"{lim.bytes_per_session} bytes per session (AGTOS_SESSION_MAX_BYTES); {end_hint}",
            -3: f"too many live sessions: {current} are open for this user, the cap is {lim.sessions_per_user} "
            "(AGTOS_USER_MAX_SESSIONS); end a session first",
            -4: f"too many journalled turns: {current} in this user's live sessions, {adding} more would pass "
            f"the cap of {lim.turns_per_user} (AGTOS_USER_MAX_TURNS); end a session first",
        }[code]

    def length(self, user_id: str, session_id: str) -> int:
        key = self._key(user_id, session_id)
        return int(self.connector.run(lambda r: r.llen(key)))

    def turns(self, user_id: str, session_id: str, start: int = 0) -> list[Turn]:
        """The journalled turns from index ``start`` on, oldest first."""
        key = self._key(user_id, session_id)
        raws = self.connector.run(lambda r: r.lrange(key, start, -1))
        return [Turn.model_validate_json(raw) for raw in raws]

    def clear(self, user_id: str, session_id: str) -> None:
        key = self._key(user_id, session_id)
        live, nturns, nbytes = self._index_keys(user_id)

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.delete(key)
            pipe.zrem(live, session_id)
            pipe.hdel(nturns, session_id)
            pipe.hdel(nbytes, session_id)
            pipe.execute()

        self.connector.run(op)
