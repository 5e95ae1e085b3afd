"""Liveness and per-tier health."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agtos.serving.deps import Coordinator

router = APIRouter(tags=["health"])


@router.get("/health")
def health(coordinator: Coordinator) -> dict[str, Any]:
    """Always 200 while the process runs; ``status`` is ``degraded`` when a tier is down."""
    return coordinator.health()
