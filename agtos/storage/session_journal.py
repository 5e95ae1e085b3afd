"""The session journal: each live session's turns as one Redis list, so a restart or another API
worker continues the session where it stopped. Errors surface as ``StorageUnavailable``.

A journal is never trimmed: an append that would pass a cap (turns or bytes of the session, live
sessions or journalled turns of the user) is refused whole with :class:`JournalFull`. Beside the
lists, three keys per user count what the caps need (expired journals drop out of them):
``journals:live`` (session → expiry, ms), ``journals:turns`` and ``journals:bytes`` (session → count).

One global sorted set, ``{prefix}:meta:journals:live``, indexes every live journal of every user
(member ``user:session``, score: the last append, ms; neither id can contain ``:``), so that an idle
sweep finds sessions no running process has seen (an API restart). The append writes it in the same
script as the journal; on Redis Cluster, where it lives in another slot than the user's keys, it is
written just before the script instead (the index may name a session whose journal is empty, never
miss one with turns). Ending the session (``clear``), forgetting the user and opting out remove it.

Ending a session clears only what it read (:meth:`SessionJournal.read`, then ``clear(..., read)``):
a turn appended (and acknowledged) while the episode was being stored stays in the journal, the
session stays live and indexed, and a later end stores it as an episode of its own.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script

from agtos.schemas import Turn
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_bytes, as_text


@dataclass(frozen=True)
class JournalLimits:
    """Caps of the journals (0: no cap)."""

    turns_per_session: int = 5_000
    bytes_per_session: int = 1024 * 1024
    sessions_per_user: int = 100
    turns_per_user: int = 20_000


class JournalFull(Exception):
    """An append would pass a journal cap; nothing of it was written."""


class IdempotencyConflict(ValueError):
    """An idempotency key already used for other turns of the session; nothing was written."""


def _idempotency_id(session_id: str, key: str) -> str:
    """The record id of a session's idempotency key (any characters the client sent, hashed)."""
    return hashlib.sha256(f"{session_id}\x00{key}".encode()).hexdigest()[:32]


def _batch_digest(batch: list[Turn]) -> str:
    """What a retry must repeat: the turns' roles and contents (times may be the server's, so differ)."""
    return hashlib.sha256(json.dumps([[t.role, t.content] for t in batch]).encode()).hexdigest()


@dataclass(frozen=True)
class Appended:
    """What an append left: the journal's length and the entries before the new turns that the
    caller had not seen (from its ``seen`` index on; all of them when ``reset``: the journal is
    shorter than the caller thought, so it was ended or expired meanwhile)."""

    length: int
    reset: bool
    unseen: list[Turn]
    replayed: bool = False  # the idempotency key's append was done before: nothing appended now


# KEYS: list, live (zset), turns (hash), bytes (hash), idempotency mark[, the global index (zset), not on a cluster]
# ARGV: session, now ms, ttl s, seen, max turns, max bytes, max sessions, max user turns, index member,
# digest of the batch ('' without an idempotency key), turn...
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
local k, add = #ARGV - 10, 0
for i = 11, #ARGV do add = add + #ARGV[i] end
local replay = 0
if ARGV[10] ~= '' then
  local done = redis.call('GET', KEYS[5])
  if done and done ~= ARGV[10] then return {-6, 0} end
  if done then replay, k = 1, 0 end  -- appended before (a retry after an unknown outcome): only the catch-up
end
if k > 0 then  -- no turns: nothing written or refused, only the catch-up below
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
  redis.call('RPUSH', list, unpack(ARGV, 11))
  if ARGV[10] ~= '' then redis.call('SET', KEYS[5], ARGV[10], 'EX', ttl) end
  if KEYS[6] then redis.call('ZADD', KEYS[6], now, ARGV[9]) end
  redis.call('EXPIRE', list, ttl)
  redis.call('ZADD', live, now + ttl * 1000, sid)
  redis.call('HINCRBY', nturns, sid, k)
  redis.call('HINCRBY', nbytes, sid, add)
  for _, key in ipairs({live, nturns, nbytes}) do redis.call('EXPIRE', key, ttl) end
end
local reset = seen > old
local first = reset and 0 or seen
local out = {old + k, reset and 1 or 0, replay}
if first < old then
  for _, raw in ipairs(redis.call('LRANGE', list, first, old - 1)) do out[#out + 1] = raw end
end
return out
"""


@dataclass(frozen=True)
class JournalRead:
    """What a session end read: the turns, and a mark of the entries they came from (their count
    and the SHA-1 of the raw entries joined by newlines) that ``clear`` checks before it removes them."""

    turns: list[Turn]
    count: int
    digest: str


# KEYS: list, live (zset), turns (hash), bytes (hash)[, the global index (zset), not on a cluster]
# ARGV: session, count read (-1: all), digest of what was read, index member.
# Removes the first ``count`` entries if they are what was read; deletes the journal (and its index
# entries) when nothing else is left. Returns {entries removed, entries left}; {-1, left} when the
# journal no longer starts with what was read (another end cleared it and turns came since): untouched.
_CLEAR_LUA = """
local list, live, nturns, nbytes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sid, n, digest = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local len = redis.call('LLEN', list)
local removed = 0
if n < 0 then
  removed = len
elseif n > 0 then
  if len < n then return {-1, len} end
  local raws = redis.call('LRANGE', list, 0, n - 1)
  if redis.sha1hex(table.concat(raws, '\\n')) ~= digest then return {-1, len} end
  if len > n then
    local gone = 0
    for _, raw in ipairs(raws) do gone = gone + #raw end
    redis.call('LTRIM', list, n, -1)
    redis.call('HSET', nturns, sid, len - n)
    local left = tonumber(redis.call('HGET', nbytes, sid) or '0') - gone
    redis.call('HSET', nbytes, sid, left > 0 and left or 0)
    return {n, len - n}
  end
  removed = n
elseif len > 0 then
  return {0, len}
end
redis.call('DEL', list)
redis.call('ZREM', live, sid)
redis.call('HDEL', nturns, sid)
redis.call('HDEL', nbytes, sid)
if KEYS[5] then redis.call('ZREM', KEYS[5], ARGV[4]) end
return {removed, 0}
"""


# KEYS: the global index; ARGV: member, the score it was read with. Removes the member only if no
# append renewed it since.
_UNINDEX_LUA = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""

INDEX_SEP = ":"  # in neither a user id nor a session id (keys.user_id_pattern, record_id_pattern)


@dataclass(frozen=True)
class IndexedSession:
    """One member of the global index of live journals."""

    user_id: str
    session_id: str
    last_append_ms: float


class SessionJournal:
    def __init__(
        self, connector: RedisConnector, keys: GlobalKeys, ttl_s: int, limits: JournalLimits | None = None
    ) -> None:
        self.connector = connector
        self.keys = keys
        self.ttl_s = ttl_s
        self.limits = limits or JournalLimits()
        self._script: Script | None = None
        self._unindex: Script | None = None
        self._clear: Script | None = None
        self.index_key = keys.meta("journals:live")
        self._cluster = connector.mode == "cluster"

    def _key(self, user_id: str, session_id: str) -> str:
        return self.keys.user(user_id).session_turns(session_id)

    def _index_keys(self, user_id: str) -> list[str]:
        base = self.keys.user(user_id).base
        return [f"{base}:journals:{part}" for part in ("live", "turns", "bytes")]

    def append(
        self, user_id: str, session_id: str, turns: list[Turn] | Turn, seen: int = 0, idempotency_key: str | None = None
    ) -> Appended:
        """Append the turns all or none and renew the TTL; ``JournalFull`` past a cap.

        ``seen`` is how many entries the caller already holds: the reply carries the others. With an
        ``idempotency_key`` the append happens once per session: a retry with the same key and turns
        (roles and contents) appends nothing and says ``replayed``; with other turns it is an
        ``IdempotencyConflict``."""
        batch = [turns] if isinstance(turns, Turn) else turns
        lim = self.limits
        mark = self.keys.user(user_id).record("journal-idem", _idempotency_id(session_id, idempotency_key or ""))
        keys = [self._key(user_id, session_id), *self._index_keys(user_id), mark]
        args: list[str | int] = [
            session_id,
            int(time.time() * 1000),
            self.ttl_s,
            seen,
            lim.turns_per_session,
            lim.bytes_per_session,
            lim.sessions_per_user,
            lim.turns_per_user,
            member := _member(user_id, session_id),
            _batch_digest(batch) if idempotency_key else "",
            *(t.model_dump_json() for t in batch),
        ]
        if not self._cluster:
            keys.append(self.index_key)

        def op(r: redis.Redis) -> list[Any]:
            if self._cluster:  # another slot: indexed first, so a journal with turns is never missing
                r.zadd(self.index_key, {member: args[1]})
            if self._script is None:
                self._script = r.register_script(_APPEND_LUA)
            return list(self._script(keys=keys, args=args, client=r))

        reply = self.connector.run(op)
        code = int(reply[0])
        if code == -6:
            raise IdempotencyConflict("this Idempotency-Key was used for other turns of this session")
        if code < 0:
            raise JournalFull(self._refusal(code, int(reply[1]), len(batch)))
        unseen = [Turn.model_validate_json(as_bytes(raw)) for raw in reply[3:]]
        return Appended(length=code, reset=bool(int(reply[1])), unseen=unseen, replayed=bool(int(reply[2])))

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

    def read(self, user_id: str, session_id: str) -> JournalRead:
        """All journalled turns, oldest first, with the mark ``clear`` needs to remove only them."""
        key = self._key(user_id, session_id)
        raws = [as_bytes(raw) for raw in self.connector.run(lambda r: r.lrange(key, 0, -1))]
        turns = [Turn.model_validate_json(raw) for raw in raws]
        return JournalRead(turns, len(raws), hashlib.sha1(b"\n".join(raws), usedforsecurity=False).hexdigest())

    def clear(self, user_id: str, session_id: str, read: JournalRead | None = None) -> int:
        """End the journal; returns how many turns are left in it.

        Without ``read``: delete it whole. With it: remove only the entries read, if the journal
        still starts with them, and delete it (index entries included) when nothing else is left.
        Turns appended after the read stay, the session live and indexed, with the per-user turn and
        byte counts lowered by exactly what was removed; a journal that no longer starts with what
        was read (another end cleared it, new turns came since) is left as it is."""
        key = self._key(user_id, session_id)
        keys = [key, *self._index_keys(user_id)]
        member = _member(user_id, session_id)
        if not self._cluster:
            keys.append(self.index_key)
        count, digest = (-1, "") if read is None else (read.count, read.digest)
        args: list[str | int] = [session_id, count, digest, member]

        def op(r: redis.Redis) -> int:
            if self._clear is None:
                self._clear = r.register_script(_CLEAR_LUA)
            _, left = (int(x) for x in self._clear(keys=keys, args=args, client=r))
            if self._cluster and not left:  # another slot; a member left behind names an empty journal: harmless
                r.zrem(self.index_key, member)
            return left

        return int(self.connector.run(op))

    # -- the global index of live journals ----------------------------------------------
    def idle(self, older_than_s: float, limit: int = 1_000) -> list[IndexedSession]:
        """Indexed sessions whose last append is at least ``older_than_s`` old, oldest first."""
        cutoff = int(time.time() * 1000 - older_than_s * 1000)
        rows: list[Any] = self.connector.run(
            lambda r: list(r.zrangebyscore(self.index_key, "-inf", cutoff, start=0, num=limit, withscores=True))
        )
        out = []
        for raw, score in rows:
            user_id, sep, session_id = as_text(raw).partition(INDEX_SEP)
            if sep and user_id and session_id:
                out.append(IndexedSession(user_id, session_id, float(score)))
        return out

    def unindex(self, entry: IndexedSession) -> bool:
        """Drop an index member read by :meth:`idle`, unless an append renewed it since."""

        def op(r: redis.Redis) -> int:
            if self._unindex is None:
                self._unindex = r.register_script(_UNINDEX_LUA)
            member = _member(entry.user_id, entry.session_id)
            return int(self._unindex(keys=[self.index_key], args=[member, entry.last_append_ms], client=r))

        return bool(self.connector.run(op))

    def forget_user(self, user_id: str) -> int:
        """Remove every index member of the user (forget-all, opt-out); returns how many."""
        self.keys.user(user_id)  # validates the id: no glob character can reach the MATCH pattern
        pattern = f"{user_id}{INDEX_SEP}*"

        def op(r: redis.Redis) -> int:
            found = [m for m, _ in r.zscan_iter(self.index_key, match=pattern, count=1_000)]
            return int(r.zrem(self.index_key, *found)) if found else 0

        return int(self.connector.run(op))


def _member(user_id: str, session_id: str) -> str:
    return f"{user_id}{INDEX_SEP}{session_id}"
