"""Query-as-Ingest gate: should this agent response become a ``response_ingest`` episode?

A response is ingested when it scores at least ``threshold`` (see
:mod:`agtos.tasks.response_scoring`), its session has had fewer than
``max_per_session`` ingests, and nothing was saved for that session in the last
``dedup_window_s`` seconds. The per-session counter and last-save time live in
one Redis hash updated by a Lua script (:mod:`agtos.storage.ingest_gate`), so
several API processes share the limits and two concurrent responses cannot both
pass. The gate only decides; the caller builds and stores the episode.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from agtos.schemas import Episode, EpisodeType, Role, Turn
from agtos.schemas.api import ResponseIngestOut
from agtos.storage.ingest_gate import IngestGateStore
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.extract import extract
from agtos.tasks.response_scoring import ResponseScore, score_response
from agtos.tasks.summarize import extractive_summary

INGEST = "ingest"
BELOW_THRESHOLD = "below-threshold"
SESSION_CAP = "session-cap"
DEDUP_WINDOW = "dedup-window"


@dataclass(frozen=True)
class IngestDecision:
    """Whether to ingest, why (``ingest``/``below-threshold``/``session-cap``/``dedup-window``)
    and the score; ``session_ingests`` is the session's ingest count after this decision
    (None for ``below-threshold``, which is decided without touching Redis)."""

    ingest: bool
    reason: str
    score: ResponseScore
    session_ingests: int | None

    def response(self, episode: Episode | None) -> ResponseIngestOut:
        """The HTTP answer: the decision, its score's fields, and the episode stored (if any)."""
        fields = {"ingest": self.ingest, "reason": self.reason, "session_ingests": self.session_ingests}
        return ResponseIngestOut.model_validate({**fields, **dict(self.score), "episode": episode})


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
        self.state = IngestGateStore(connector, keys, ttl_s)
        self.threshold = threshold
        self.max_per_session = max_per_session
        self.dedup_window_s = dedup_window_s
        self._clock = clock

    def session_key(self, user_id: str, session_id: str) -> str:
        return self.state.session_key(user_id, session_id)

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
        reason, count = self.state.admit(key, self._clock(), self.dedup_window_s, self.max_per_session)
        return IngestDecision(reason == INGEST, reason, score, count)

    def mark_interaction_saved(self, user_id: str, session_id: str) -> None:
        """Record that an interaction of the session was saved now (opens the dedup window)."""
        self.state.mark_saved(self.session_key(user_id, session_id), self._clock())

    def session_ingests(self, user_id: str, session_id: str) -> int:
        """How many responses of the session were ingested so far."""
        return self.state.count(self.session_key(user_id, session_id))

    def reset_session(self, user_id: str, session_id: str) -> None:
        """Forget the session's counters (e.g. when the session ends)."""
        self.state.reset(self.session_key(user_id, session_id))


def response_episode(user_id: str, session_id: str, response: str, query: str | None, score: ResponseScore) -> Episode:
    """The ``response_ingest`` episode of an admitted response (its id is a digest: re-ingesting updates it)."""
    digest = hashlib.sha256(f"{user_id}\x00{session_id}\x00{response}".encode()).hexdigest()[:16]
    turns = [Turn(role=Role.assistant, content=response)]
    found = extract(turns)
    said = extractive_summary(turns) or response.strip()  # all small talk: the summary keeps no sentence
    summary = (f"Asked: {query.strip()[:300]}. " if query else "") + said
    return Episode(
        id=f"ep-r{digest}",
        user_id=user_id,
        session_id=session_id,
        summary=summary[:20_000],
        keywords=found.keywords,
        topic=found.topic,
        importance=min(1.0, score.score / 12),
        type=EpisodeType.response_ingest,
    )
