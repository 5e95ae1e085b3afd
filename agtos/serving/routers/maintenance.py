"""Memory lint: run a sweep, read its history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query

from agtos.memory.errors import MaintenanceDisabledError
from agtos.serving.deps import Coordinator, UserId

router = APIRouter(prefix="/api/memory/maintain", tags=["maintenance"])


@router.post("")
def maintain(coordinator: Coordinator, user_id: UserId) -> dict[str, Any]:
    """Run the six-step lint for this user now (waits while the ResourceGuard defers)."""
    try:
        return coordinator.maintain(user_id).model_dump()
    except MaintenanceDisabledError as exc:
        raise HTTPException(409, str(exc)) from exc


@router.get("/history")
def history(
    coordinator: Coordinator, user_id: UserId, limit: Annotated[int, Query(ge=1, le=200)] = 20
) -> dict[str, Any]:
    """Past sweep reports, newest first."""
    reports = coordinator.maintenance.history(user_id, limit)
    return {"reports": [r.model_dump() for r in reports], "count": len(reports)}


@router.get("/history/{timestamp}")
def report(
    coordinator: Coordinator, user_id: UserId, timestamp: Annotated[int, Path(ge=0, le=10**14)]
) -> dict[str, Any]:
    found = coordinator.maintenance.get(user_id, timestamp)
    if found is None:
        raise HTTPException(404, f"no maintenance report at {timestamp} for this user")
    return found.model_dump()
