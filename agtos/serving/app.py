"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agtos import __version__
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.errors import install_error_handlers
from agtos.serving.knowledge import mount_knowledge
from agtos.serving.limits import BodySizeLimitMiddleware
from agtos.serving.routers import (
    entities,
    health,
    imports,
    insight,
    maintenance,
    memory,
    metrics,
    privacy,
    sessions,
)


def create_app(settings: Settings | None = None, coordinator: MemoryCoordinator | None = None) -> FastAPI:
    """Build the API around a coordinator (created from ``settings`` or the environment)."""
    owned = coordinator is None
    coord = coordinator or MemoryCoordinator(settings or Settings.from_env())

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            coord.close()

    app = FastAPI(
        title="agtos memory",
        version=__version__,
        description="Working, episodic and semantic memory for AI agents. Identify the user with the X-User-Id header.",
        lifespan=lifespan,
    )
    app.state.coordinator = coord
    install_error_handlers(app)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=coord.settings.max_body_bytes)
    routers = (health, memory, sessions, insight, maintenance, privacy, imports, metrics, entities)
    for module in routers:
        app.include_router(module.router)
    mount_knowledge(app)
    return app
