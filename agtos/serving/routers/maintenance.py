"""Memory lint: request a sweep (it runs off the request), follow the run, read the history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response

from agtos.schemas import MaintenanceReport
from agtos.schemas.api import MaintenanceHistoryOut, MaintenanceRun
from agtos.serving.deps import Coordinator, UserId, id_path
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.maintenance_runs import MaintenanceRunner
from agtos.serving.offload import in_read_thread
from agtos.serving.strict_json import StrictJSONRoute

router = APIRouter(
    prefix="/api/memory/maintain", tags=["maintenance"], responses=USER_ERRORS, route_class=StrictJSONRoute
)

RUN_LOCATION = {"Location": {"description": "the run's status URL", "schema": {"type": "string"}}}


def _runner(request: Request) -> MaintenanceRunner:
    return request.app.state.maintenance_runner


@router.post(
    "",
    status_code=202,
    response_model=MaintenanceRun,
    responses={202: {"description": "Run queued", "headers": RUN_LOCATION}, **errors(403, 409)},
)
def maintain(request: Request, response: Response, coordinator: Coordinator, user_id: UserId) -> MaintenanceRun:
    """Queue the six-step lint for this user; poll ``runs/{runId}`` for its report (a completed
    sweep's report also enters the history, with ``summary.runId``). While a run of the user is
    still queued, asking again returns that run."""
    if not coordinator.settings.maintenance.enabled:
        raise HTTPException(409, "memory maintenance is disabled (AGTOS_MAINTENANCE_ENABLED=false)")
    coordinator.privacy.require_persistence(user_id)
    run = _runner(request).submit(user_id)
    response.headers["Location"] = f"{router.prefix}/runs/{run.run_id}"
    return run


@router.get("/runs/{run_id}", response_model=MaintenanceRun, responses=errors(404))
async def run_status(
    request: Request,
    user_id: UserId,
    run_id: Annotated[str, id_path("the run's id (runId of the 202)")],
) -> MaintenanceRun:
    """A requested run: ``queued``, ``running``, then ``completed``/``deferred`` with its report, or ``failed``."""
    found = await in_read_thread(_runner(request).get, user_id, run_id)
    if found is None:
        raise HTTPException(404, f"no maintenance run {run_id!r} for this user")
    return found


@router.get("/history", response_model=MaintenanceHistoryOut)
async def history(
    coordinator: Coordinator, user_id: UserId, limit: Annotated[int, Query(ge=1, le=200)] = 20
) -> MaintenanceHistoryOut:
    """Past sweep reports, newest first."""
    reports = await in_read_thread(coordinator.maintenance.history, user_id, limit)
    return MaintenanceHistoryOut(reports=reports, count=len(reports))


@router.get("/history/{timestamp}", response_model=MaintenanceReport, responses=errors(404))
async def report(
    coordinator: Coordinator, user_id: UserId, timestamp: Annotated[int, Path(ge=0, le=10**14)]
) -> MaintenanceReport:
    found = await in_read_thread(coordinator.maintenance.get, user_id, timestamp)
    if found is None:
        raise HTTPException(404, f"no maintenance report at {timestamp} for this user")
    return found
