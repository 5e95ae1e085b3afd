"""Whole-conversation ingest: back-fill memory from an existing chat log."""

from __future__ import annotations

from fastapi import APIRouter

from agtos.schemas.api import ConversationsIn, ConversationsOut
from agtos.serving.deps import Coordinator, UserId
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.strict_json import StrictJSONRoute

router = APIRouter(prefix="/api/memory", tags=["conversations"], responses=USER_ERRORS, route_class=StrictJSONRoute)


@router.post("/conversations", response_model=ConversationsOut, responses=errors(403, 413))
def ingest_conversations(coordinator: Coordinator, user_id: UserId, body: ConversationsIn) -> ConversationsOut:
    """Store past sessions (each: id, optional ``started_at``, speakers, dated turns) as episodes in one batch.

    Idempotent on session ids: a session id already stored is answered ``unchanged`` and not written
    again. At most 100 sessions per request and ``AGTOS_MAX_BODY_BYTES`` per body (413 beyond);
    ``agtos memory ingest FILE.jsonl`` sends a larger log in batches."""
    return coordinator.ingest_conversations(user_id, body.sessions)
