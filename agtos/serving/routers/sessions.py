"""Live sessions: append turns to working memory, read it, end the session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path

from agtos.memory.working import WorkingMemory
from agtos.schemas.api import SessionEndOut, SessionOut, TurnsIn
from agtos.serving.deps import Coordinator, UserId
from agtos.serving.errors import USER_ERRORS, errors

router = APIRouter(prefix="/api/memory/sessions", tags=["sessions"], responses=USER_ERRORS)

SessionId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.-]{1,128}$", description="the agent's session id")]


def _session_out(session_id: str, wm: WorkingMemory) -> SessionOut:
    """A copy taken now: the session may change while the response is serialised."""
    return SessionOut(
        session_id=session_id,
        messages=list(wm.messages),
        message_count=len(wm.messages),
        token_count=wm.token_count,
        compactions=wm.compactions,
        task_state=dict(wm.task_state),
    )


@router.post("/{session_id}/turns", response_model=SessionOut, responses=errors(413))
def append_turns(coordinator: Coordinator, user_id: UserId, session_id: SessionId, body: TurnsIn) -> SessionOut:
    """Append one or more turns; older turns are summarised when the limits are passed."""
    wm = None
    for turn in body.named_turns():
        wm = coordinator.add_turn(user_id, session_id, turn)
    assert wm is not None
    return _session_out(session_id, wm)


@router.get("/{session_id}", response_model=SessionOut, responses=errors(404))
def get_session(coordinator: Coordinator, user_id: UserId, session_id: SessionId) -> SessionOut:
    wm = coordinator.session(user_id, session_id)
    if wm is None:
        raise HTTPException(404, f"no live session {session_id!r} for this user")
    return _session_out(session_id, wm)


@router.post("/{session_id}/end", response_model=SessionEndOut)
def end_session(coordinator: Coordinator, user_id: UserId, session_id: SessionId) -> SessionEndOut:
    """Summarise the session into an episode (if the save heuristics keep it). Idempotent."""
    return SessionEndOut.model_validate(coordinator.end_session(user_id, session_id))
