"""Cross-tool import: find other AI tools' memories on this machine and ingest them."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from agtos.importers import scan_sources
from agtos.serving.deps import Coordinator, UserId

router = APIRouter(prefix="/api/memory", tags=["import"])

SourceName = Literal["claude_code", "cursor", "windsurf", "aider", "copilot"]


@router.get("/sources")
async def sources(coordinator: Coordinator) -> dict[str, Any]:
    """What can be imported (source, path, item count); the home is AGTOS_IMPORT_HOME or ~."""
    found = await run_in_threadpool(scan_sources, coordinator.settings.import_home)
    return {"sources": [s.model_dump() for s in found], "count": len(found)}


class ImportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources: list[SourceName] | None = Field(default=None, max_length=5, description="all when absent")


@router.post("/import")
async def run_import(coordinator: Coordinator, user_id: UserId, body: ImportRequest | None = None) -> dict[str, Any]:
    """Import (all or the chosen sources) through the ingestion steps; re-import adds nothing."""
    chosen: list[str] | None = list(body.sources) if body and body.sources else None
    return await run_in_threadpool(coordinator.import_sources, user_id, chosen)
