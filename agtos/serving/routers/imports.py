"""Cross-tool import: find other AI tools' memories on this machine and ingest them.

An operator action: both routes need a service key (so auth must be on) and
``AGTOS_IMPORT_ENABLED=true``; the import names its target user in ``X-User-Id``. The CLI
(``agtos memory import``) needs neither: it runs as the machine's own user.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException
from fastapi.concurrency import run_in_threadpool

from agtos.importers import scan_sources
from agtos.schemas.api import ImportOut, ImportRequest, SourceOut, SourcesOut
from agtos.serving.auth import Principal
from agtos.serving.deps import Coordinator, UserId, require_service
from agtos.serving.errors import USER_ERRORS, errors
from agtos.serving.strict_json import StrictJSONRoute

router = APIRouter(prefix="/api/memory", tags=["import"], route_class=StrictJSONRoute)


async def import_allowed(
    coordinator: Coordinator, principal: Annotated[Principal, Depends(require_service)]
) -> Principal:
    """403 unless AGTOS_IMPORT_ENABLED is true and the caller holds a service key."""
    if not coordinator.settings.import_enabled:
        raise HTTPException(status_code=403, detail="imports over HTTP are off; set AGTOS_IMPORT_ENABLED=true")
    return principal


ImportAllowed = Annotated[Principal, Depends(import_allowed)]


@router.get("/sources", response_model=SourcesOut, responses=errors(403, 500))
async def sources(coordinator: Coordinator, _: ImportAllowed) -> SourcesOut:
    """What can be imported (source, path, item count) under AGTOS_IMPORT_HOME or ~ (service key, opt-in)."""
    found = await run_in_threadpool(scan_sources, coordinator.settings.import_home)
    return SourcesOut(sources=[SourceOut.model_validate(s) for s in found], count=len(found))


@router.post("/import", response_model=ImportOut, responses=USER_ERRORS | errors(403, 413))
async def run_import(
    coordinator: Coordinator, _: ImportAllowed, user_id: UserId, body: ImportRequest | None = None
) -> ImportOut:
    """Import (all or the chosen sources) for the user named in X-User-Id (service key, opt-in); idempotent."""
    chosen: list[str] | None = list(body.sources) if body and body.sources else None
    return ImportOut.model_validate(await run_in_threadpool(coordinator.import_sources, user_id, chosen))
