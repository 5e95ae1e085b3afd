"""Query-as-Ingest gate: should this agent response become a ``response_ingest`` episode?

A response is ingested when it scores at least ``threshold`` (see
:mod:`agtos.tasks.response_scoring`), its session has had fewer than
``max_per_session`` ingests, and nothing was saved for that session in the last
``dedup_window_s`` seconds. The per-session counter and last-save time live in
one Redis hash (``{prefix}:u:{user}:qai:{session}``) updated by a Lua script, so
several API processes share the limits and two concurrent responses cannot both
pass. The gate only decides; the caller builds and stores the episode.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agtos.storage.keys import GlobalKeys, check_record_id, check_user_id
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.response_scoring import ResponseScore, score_response

KEY_KIND = "qai"
INGEST = "ingest"
BELOW_THRESHOLD = "below-threshold"
SESSION_CAP = "session-cap"
DEDUP_WINDOW = "dedup-window"

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


@dataclass(frozen=True)
class IngestDecision:
    """Whether to ingest, why (``ingest``/``below-threshold``/``session-cap``/``dedup-window``)
    and the score; ``session_ingests`` is the session's ingest count after this decision
    (None for ``below-threshold``, which is decided without touching Redis)."""

    ingest: bool
    reason: str
    score: ResponseScore
    session_ingests: int | None

    def public(self) -> dict[str, Any]:
        return {
            "ingest": self.ingest,
            "reason": self.reason,
            "sessionIngests": self.session_ingests,
            **self.score.public(),
        }


class QueryIngestGate:
    """Score, rate-limit and de-duplicate response ingestion, with its state in Redis."""

    def __init__(
        self,
        connector: RedisConnector,
        keys: GlobalKeys,
        *,
        threshold: int = 6,
        max_per_session: int = 5,
        dedup_window_s: float = 5.0,
        ttl_s: int = 48 * 3600,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.connector = connector
        self.keys = keys
        self.threshold = threshold
        self.max_per_session = max_per_session
        self.dedup_window_s = dedup_window_s
        self.ttl_s = max(1, int(ttl_s))
        self._clock = clock

    def session_key(self, user_id: str, session_id: str) -> str:
        return self.keys.user(check_user_id(user_id)).record(KEY_KIND, check_record_id(session_id, "session id"))

    def evaluate(
        self,
        user_id: str,
        session_id: str,
        response: str,
        *,
        tool_calls: int = 0,
        reasoning_steps: int | None = None,
    ) -> IngestDecision:
        """Decide for one response; an ``ingest`` decision is already counted and time-stamped.

        Raises StorageUnavailable when Redis is down (the episode could not be stored either).
        """
        key = self.session_key(user_id, session_id)  # validates ids before anything else
        score = score_response(response, tool_calls=tool_calls, reasoning_steps=reasoning_steps)
        if score.score < self.threshold:
            return IngestDecision(False, BELOW_THRESHOLD, score, None)
        args = (self._clock(), self.dedup_window_s, self.max_per_session, self.ttl_s)
        reason, count = self.connector.run(lambda r: r.eval(_ADMIT_LUA, 1, key, *(repr(a) for a in args)))
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        return IngestDecision(reason == INGEST, reason, score, int(count))

    def mark_interaction_saved(self, user_id: str, session_id: str) -> None:
        """Record that an interaction of the session was saved now (opens the dedup window)."""
        key = self.session_key(user_id, session_id)
        now, ttl = self._clock(), self.ttl_s

        def op(r: Any) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.hset(key, "last_saved_at", repr(now))
            pipe.expire(key, ttl)
            pipe.execute()

        self.connector.run(op)

    def session_ingests(self, user_id: str, session_id: str) -> int:
        """How many responses of the session were ingested so far."""
        key = self.session_key(user_id, session_id)
        raw = self.connector.run(lambda r: r.hget(key, "count"))
        return int(raw) if raw else 0

    def reset_session(self, user_id: str, session_id: str) -> None:
        """Forget the session's counters (e.g. when the session ends)."""
        key = self.session_key(user_id, session_id)
        self.connector.run(lambda r: r.delete(key))
