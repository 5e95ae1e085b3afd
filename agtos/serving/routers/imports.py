"""Cross-tool import: find other AI tools' memories on this machine and ingest them."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from agtos.importers import scan_sources
from agtos.schemas.api import ImportOut, SourceOut, SourcesOut
from agtos.serving.deps import Coordinator, UserId
from agtos.serving.errors import USER_ERRORS, errors

router = APIRouter(prefix="/api/memory", tags=["import"])

SourceName = Literal["claude_code", "cursor", "windsurf", "aider", "copilot"]


@router.get("/sources", response_model=SourcesOut, responses=errors(500))
async def sources(coordinator: Coordinator) -> SourcesOut:
    """What can be imported (source, path, item count); the home is AGTOS_IMPORT_HOME or ~."""
    found = await run_in_threadpool(scan_sources, coordinator.settings.import_home)
    return SourcesOut(sources=[SourceOut.model_validate(s) for s in found], count=len(found))


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources: list[SourceName] | None = Field(default=None, max_length=5, description="all when absent")


@router.post("/import", response_model=ImportOut, responses=USER_ERRORS | errors(403, 413))
async def run_import(coordinator: Coordinator, user_id: UserId, body: ImportRequest | None = None) -> ImportOut:
    """Import (all or the chosen sources) through the ingestion steps; re-import adds nothing."""
    chosen: list[str] | None = list(body.sources) if body and body.sources else None
    return ImportOut.model_validate(await run_in_threadpool(coordinator.import_sources, user_id, chosen))
