"""Liveness and per-tier health."""

from __future__ import annotations

from fastapi import APIRouter

from agtos.schemas.api import HealthOut
from agtos.serving.deps import Coordinator
from agtos.serving.errors import errors
from agtos.serving.offload import in_read_thread

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthOut, response_model_exclude_unset=True, responses=errors(500))
async def health(coordinator: Coordinator) -> HealthOut:
    """Always 200 while the process runs; ``status`` is ``degraded`` when a tier is down."""
    return HealthOut.model_validate(await in_read_thread(coordinator.health))
