"""Prometheus scrape endpoint."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from agtos.serving.auth import Principal
from agtos.serving.deps import PRINCIPAL_KEY
from agtos.serving.errors import errors

router = APIRouter(tags=["metrics"])

REGISTRY_STATE_ATTR = "metrics_registry"


def app_registry(request: Request) -> CollectorRegistry:
    """``app.state.metrics_registry`` when the app set one, else the process-wide REGISTRY."""
    registry = getattr(request.app.state, REGISTRY_STATE_ATTR, None)
    return registry if isinstance(registry, CollectorRegistry) else REGISTRY


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
        **errors(403, 500),
    },
)
def metrics(request: Request) -> Response:
    """All metrics in the Prometheus text exposition format: the whole server's counters, so with auth
    on a service key reads them, not a user key (403; the key is the one the app's guard found)."""
    caller: Principal | None = request.scope.get(PRINCIPAL_KEY)
    if caller is not None and not caller.is_service:
        raise HTTPException(status_code=403, detail="the metrics are the whole server's: they need a service key")
    return Response(generate_latest(app_registry(request)), media_type=CONTENT_TYPE_LATEST)
