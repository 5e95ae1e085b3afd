"""Whole-conversation ingest: past sessions of a chat log become episodes in one batch (idempotent).

Each session's episode id is derived from the user and the session id alone
(:func:`~agtos.memory.episodic.session_episode_id`, as for imports), so a session id that is
already stored is answered ``unchanged`` and not summarised, embedded or written again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from agtos.memory.episodic import session_episode_id
from agtos.memory.ingestion_pipeline import IngestionReport
from agtos.memory.live_sessions import dated_like_their_neighbours
from agtos.schemas import IngestItem
from agtos.schemas.api import ConversationResultOut, ConversationSession, ConversationsOut

if TYPE_CHECKING:
    from agtos.memory.services import Services

Ingest = Callable[[list[IngestItem]], IngestionReport]
Status = Literal["stored", "unchanged", "skipped"]


def ingest_conversations(
    rt: Services, ingest: Ingest, user_id: str, sessions: Sequence[ConversationSession]
) -> ConversationsOut:
    """The sessions not stored yet go through ``ingest`` in one batch (one embedding call)."""
    episode_ids = {s.id: session_episode_id(user_id, s.id) for s in sessions}
    existing = rt.episodes.existing_ids(user_id, list(episode_ids.values()))
    fresh = [
        IngestItem(user_id=user_id, session_id=s.id, turns=dated_like_their_neighbours(s.dated_turns()))
        for s in sessions
        if episode_ids[s.id] not in existing
    ]
    report = ingest(fresh) if fresh else IngestionReport()
    stored = set(report.episode_ids)
    reasons = {skip["sessionId"]: skip["reason"] for skip in report.skipped}
    results = []
    for s in sessions:
        episode_id = episode_ids[s.id]
        status: Status = "unchanged" if episode_id in existing else "stored" if episode_id in stored else "skipped"
        skipped = status == "skipped"
        results.append(
            ConversationResultOut(
                id=s.id,
                status=status,
                episode_id=None if skipped else episode_id,
                turns=len(s.turns),
                reason=reasons.get(s.id, "not stored") if skipped else None,
            )
        )
    counts = {status: sum(r.status == status for r in results) for status in ("stored", "unchanged", "skipped")}
    return ConversationsOut(sessions=results, memories=report.memories, degraded=report.degraded, **counts)
