"""The FastAPI application factory."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from agtos import __version__
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.auth import BEARER, WRITE_METHODS, Authenticator, RequestGuardMiddleware
from agtos.serving.cors import JsonCorsMiddleware, cors_options
from agtos.serving.deps import USER_HEADER, get_principal, get_user_id, user_header_parameter
from agtos.serving.encoded_paths import EncodedSlashMiddleware
from agtos.serving.errors import error_response, install_error_handlers
from agtos.serving.gc_tuning import tuned_gc
from agtos.serving.head_requests import HeadAsGetMiddleware
from agtos.serving.http_protocol import install as judge_absolute_targets_by_authority
from agtos.serving.inflight import InflightCounter, InflightMiddleware
from agtos.serving.knowledge import mount_knowledge
from agtos.serving.limits import BodySizeLimitMiddleware
from agtos.serving.maintenance_runs import MaintenanceRunner
from agtos.serving.routers import (
    conversations,
    entities,
    health,
    imports,
    insight,
    maintenance,
    memories,
    memory,
    metrics,
    privacy,
    sessions,
)

log = logging.getLogger(__name__)


async def sweep_idle_sessions(coordinator: MemoryCoordinator, stop: asyncio.Event) -> None:
    """End sessions idle past AGTOS_SESSION_IDLE_MINUTES, checking a few times per period."""
    idle_s = coordinator.settings.session_idle_minutes * 60
    if idle_s <= 0:
        return
    interval = min(60.0, max(0.2, idle_s / 4))
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            try:
                await run_in_threadpool(coordinator.end_idle_sessions)
            except Exception:
                log.exception("idle-session sweep failed; retrying next period")


def create_app(settings: Settings | None = None, coordinator: MemoryCoordinator | None = None) -> FastAPI:
    """Build the API around a coordinator (created from ``settings`` or the environment)."""
    owned = coordinator is None
    coord = coordinator or MemoryCoordinator(settings or Settings.from_env())
    runner = MaintenanceRunner(coord)
    inflight = InflightCounter()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        sweeper = asyncio.create_task(sweep_idle_sessions(coord, stop))
        if coord.settings.ingest_mode == "queue" and coord.settings.ingest_worker:
            # session ends queue their ingestion; this thread works it off, yielding to the requests
            coord.start_ingest_worker().yield_to(inflight.busy, coord.settings.worker_yield_max_s)
        cfg = coord.settings
        with tuned_gc(cfg.gc_freeze, cfg.gc_stats_dir):  # last: after start-up
            yield
        stop.set()
        await sweeper
        await run_in_threadpool(coord.stop_ingest_worker)
        await run_in_threadpool(runner.drain)
        if owned:
            coord.close()

    app = FastAPI(
        title="agtos memory",
        version=__version__,
        description="Working, episodic and semantic memory for AI agents. Identify the user with the X-User-Id "
        "header; once any API key exists, send it as `Authorization: Bearer <key>`.",
        lifespan=lifespan,
    )
    app.state.coordinator = coord
    app.state.maintenance_runner = runner
    app.state.authenticator = Authenticator(coord)
    app.state.inflight = inflight
    install_error_handlers(app)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=coord.settings.max_body_bytes)
    if coord.settings.cors_origins:  # off by default: a preflight is then a 405
        app.add_middleware(JsonCorsMiddleware, **cors_options(coord.settings.cors_origins))
    cfg = coord.settings
    app.add_middleware(EncodedSlashMiddleware)  # an id holding '%2F' is refused as an id (422), not a 404
    # uvicorn's httptools protocol, as `uvicorn agtos.serving.main:app` runs it too: Host from an absolute target
    judge_absolute_targets_by_authority()
    app.add_middleware(RequestGuardMiddleware, allowed_hosts=cfg.allowed_hosts, cors_origins=cfg.cors_origins)
    app.add_middleware(HeadAsGetMiddleware)  # HEAD as GET, no body: guarded and counted as its GET
    app.add_middleware(InflightMiddleware, counter=inflight)  # outermost: a request counts from its start
    app.include_router(health.router)  # open: liveness needs no key
    guarded = (memory, sessions, insight, maintenance, privacy, imports, metrics, entities, conversations, memories)
    for module in guarded:
        app.include_router(module.router, dependencies=[Depends(get_principal)])
    document_guards(app, [module.router for module in guarded])
    mount_knowledge(app)
    return app


def document_guards(app: FastAPI, keyed: Iterable[APIRouter]) -> None:
    """Add the guards to every operation of the served OpenAPI document: the bearer scheme on the
    operations of the ``keyed`` routers (``get_principal`` reads it without a FastAPI security
    dependency), and the statuses 400 (Host), 401/429 (keys, where the bearer scheme applies), 403
    (a user key naming another user, a cross-site write), 413 (a body over the limit, on any method) and
    415 (a non-JSON write)."""
    build = app.openapi
    keyed = list(keyed)
    operations = {
        (route.path_format, method.lower())  # as OpenAPI writes it: no convertor
        for router in keyed
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    named = {  # the operations that read X-User-Id (get_user_id)
        (route.path_format, method.lower())  # as OpenAPI writes it: no convertor
        for router in (app.router, *keyed)
        for route in router.routes
        if isinstance(route, APIRoute) and _names_user(route.dependant)
        for method in route.methods or ()
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            scheme = BEARER.model.model_dump(mode="json", by_alias=True, exclude_none=True)
            schema.setdefault("components", {}).setdefault("securitySchemes", {})[BEARER.scheme_name] = scheme
            for path, item in schema.get("paths", {}).items():
                for method, op in item.items():
                    if (path, method) in named:
                        _add_user_header(op)
                    if (path, method) in operations:
                        op["security"] = [{BEARER.scheme_name: []}]
                    _add_guard_statuses(method.upper() in WRITE_METHODS, op)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to amend the schema


def _add_user_header(op: dict[str, Any]) -> None:
    """Declare ``X-User-Id`` where FastAPI put a dependency's header parameter: last of the parameters,
    which come before the request body and the responses (the same document, byte for byte)."""
    if "parameters" in op:
        op["parameters"].append(user_header_parameter())
        return
    items = list(op.items())
    at = next((i for i, (key, _) in enumerate(items) if key in ("requestBody", "responses")), len(items))
    op.clear()
    op.update([*items[:at], ("parameters", [user_header_parameter()]), *items[at:]])


def _names_user(dependant: Dependant) -> bool:
    """Whether ``get_user_id`` is among the (nested) dependencies of a route."""
    return any(d.call is get_user_id or _names_user(d) for d in dependant.dependencies)


def _add_guard_statuses(writes: bool, op: dict[str, Any]) -> None:
    names = {p.get("name", "").lower() for p in op.get("parameters", []) if p.get("in") == "header"}
    codes = [400]
    if op.get("security"):
        codes += [401, 429, 503]  # 503: keys cannot be checked while Redis is down
    if writes or USER_HEADER.lower() in names:
        codes.append(403)
    codes.append(413)  # the body limit refuses any request's oversized body, also where none is read (a GET's)
    if writes:
        codes.append(415)
    responses = op.setdefault("responses", {})
    for code in codes:
        responses.setdefault(str(code), error_response(code))
