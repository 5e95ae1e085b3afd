"""Request dependencies: the coordinator of this app and the caller's user id.

Both are ``async`` on purpose: they never block, and FastAPI would otherwise run each sync
dependency on a worker thread — a thread hop per dependency per request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from agtos.memory.coordinator import MemoryCoordinator
from agtos.storage.keys import check_user_id

USER_HEADER = "X-User-Id"


async def get_coordinator(request: Request) -> MemoryCoordinator:
    return request.app.state.coordinator


async def get_user_id(
    request: Request,
    x_user_id: Annotated[
        str | None,
        Header(
            alias=USER_HEADER,
            description="Whose memory this call reads or writes; the configured default user when absent.",
        ),
    ] = None,
) -> str:
    """The caller's user id from ``X-User-Id`` (validated), else the default user."""
    coordinator: MemoryCoordinator = request.app.state.coordinator
    return check_user_id(x_user_id if x_user_id is not None else coordinator.settings.default_user)


Coordinator = Annotated[MemoryCoordinator, Depends(get_coordinator)]
UserId = Annotated[str, Depends(get_user_id)]
