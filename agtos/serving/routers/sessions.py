"""Live sessions: append turns to working memory, read it, end the session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.live_sessions import LoneRequest
from agtos.memory.working import WorkingMemory
from agtos.schemas.api import SessionEndOut, SessionOut, TurnsAppendedOut, TurnsIn
from agtos.serving.deps import Coordinator, UserId, id_path
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.offload import in_thread
from agtos.serving.responses import json_model
from agtos.serving.strict_json import StrictJSONRoute

router = APIRouter(prefix="/api/memory/sessions", tags=["sessions"], responses=USER_ERRORS, route_class=StrictJSONRoute)

SessionId = Annotated[str, id_path("the agent's session id")]


def _session_out(session_id: str, wm: WorkingMemory) -> SessionOut:
    """A copy taken now: the session may change while the response is serialised."""
    with wm.lock:
        return SessionOut(
            session_id=session_id,
            messages=list(wm.messages),
            message_count=len(wm.messages),
            token_count=wm.token_count,
            compactions=wm.compactions,
            task_state=dict(wm.task_state),
        )


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Any unique string per append (a UUID): a retry with the same key and turns after a 503 or a "
        "lost response is acknowledged without appending them again (a timed-out write may have landed); "
        "the same key with other turns of the session is a 422. Kept as long as the session's journal.",
    ),
]


@router.post("/{session_id}/turns", response_model=TurnsAppendedOut, responses=errors(413))
async def append_turns(
    request: Request,
    user_id: UserId,
    session_id: SessionId,
    body: TurnsIn,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Append one or more turns, all or none: 200 only once they are journalled in Redis (503 when
    it is down, 413 past a journal cap: nothing written). Older turns are summarised when the
    working-memory limits are passed; ``GET`` the session for its messages. Send an
    ``Idempotency-Key`` to retry safely."""
    # the coordinator from the app's state, not the Coordinator dependency: one fewer dependency to solve
    coordinator: MemoryCoordinator = request.app.state.coordinator
    return await in_thread(_append_turns, coordinator, user_id, session_id, body, idempotency_key)


def _append_turns(
    coordinator: MemoryCoordinator, user_id: str, session_id: str, body: TurnsIn, idempotency_key: str | None
) -> Response:
    turns = body.named_turns()
    wm = coordinator.add_turns(user_id, session_id, turns, idempotency_key)
    with wm.lock:
        appended = TurnsAppendedOut(
            session_id=session_id,
            appended=len(turns),
            message_count=len(wm.messages),
            token_count=wm.token_count,
            compactions=wm.compactions,
            journal_length=wm.journal_len,
        )
    return json_model(appended)


@router.get("/{session_id}", response_model=SessionOut, responses=errors(404))
def get_session(coordinator: Coordinator, user_id: UserId, session_id: SessionId) -> SessionOut:
    wm = coordinator.session(user_id, session_id)
    if wm is None:
        raise HTTPException(404, f"no live session {session_id!r} for this user")
    return _session_out(session_id, wm)


@router.post("/{session_id}/end", response_model=SessionEndOut)
async def end_session(
    request: Request,
    coordinator: Coordinator,
    user_id: UserId,
    session_id: SessionId,
    wait: Annotated[
        float | None,
        Query(
            ge=0,
            le=60,
            allow_inf_nan=False,  # NaN compares false with both bounds: said as "a finite number", not "<= 60"
            description="queue mode: wait up to this many seconds for the episode to be stored (0: answer at "
            "once); without it, a lone client's end waits up to AGTOS_END_IDLE_WAIT_S (see the description)",
        ),
    ] = None,
) -> Response:
    """End the session: it becomes an episode if the save heuristics keep it. Idempotent.

    Inline mode stores the episode before answering (``status: done``). Queue mode
    (AGTOS_INGEST_MODE=queue, the ``agtos serve`` default) holds the turns in the durable ingestion
    queue and answers ``queued`` with the episode id, the queue position and an estimate of when the
    episode is searchable; ``?wait=S`` waits up to S seconds for the worker (then ``done``).
    Without ``wait``, an end that is the only request in flight in its API process, with a worker
    alive, waits for its own episode up to AGTOS_END_IDLE_WAIT_S (4 s; 0: off) and answers ``done``:
    a client that ends a session and then asks finds it. It answers ``queued`` at once under
    concurrent requests (and stops waiting when one arrives) or with no live worker; ``?wait=0``
    always answers at once. Until the worker stores a queued episode, other clients' searches and
    contexts do not see the session's turns."""
    lone: LoneRequest | None = getattr(request.app.state, "inflight", None) if wait is None else None
    return await in_thread(_end_session, coordinator, user_id, session_id, wait or 0.0, lone)


def _end_session(
    coordinator: MemoryCoordinator, user_id: str, session_id: str, wait: float, lone: LoneRequest | None
) -> Response:
    return json_model(SessionEndOut.model_validate(coordinator.end_session(user_id, session_id, wait, lone)))
