"""Live sessions: append turns to working memory, read it, end the session."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel, ConfigDict, Field

from agtos.schemas import Turn
from agtos.serving.deps import Coordinator, UserId

router = APIRouter(prefix="/api/memory/sessions", tags=["sessions"])

SessionId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,128}$", description="the agent's session id")]


class TurnsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    turns: list[Turn] = Field(min_length=1, max_length=200)


@router.post("/{session_id}/turns")
def append_turns(coordinator: Coordinator, user_id: UserId, session_id: SessionId, body: TurnsIn) -> dict[str, Any]:
    """Append one or more turns; older turns are summarised when the limits are passed."""
    wm = None
    for turn in body.turns:
        wm = coordinator.add_turn(user_id, session_id, turn)
    assert wm is not None
    return {"sessionId": session_id, **wm.snapshot()}


@router.get("/{session_id}")
def get_session(coordinator: Coordinator, user_id: UserId, session_id: SessionId) -> dict[str, Any]:
    wm = coordinator.session(user_id, session_id)
    if wm is None:
        raise HTTPException(404, f"no live session {session_id!r} for this user")
    return {"sessionId": session_id, **wm.snapshot()}


@router.post("/{session_id}/end")
def end_session(coordinator: Coordinator, user_id: UserId, session_id: SessionId) -> dict[str, Any]:
    """Summarise the session into an episode (if the save heuristics keep it). Idempotent."""
    return coordinator.end_session(user_id, session_id).public()
