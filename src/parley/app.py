"""The composition root: `create_app(settings)` wires settings, database, stores and routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from parley import __version__
from parley.api.errors import install_error_handlers
from parley.api.middleware import AccessLogMiddleware, BodyLimitMiddleware
from parley.api.openapi import build_openapi
from parley.api.routes import agents, api_keys, health, projects
from parley.clock import Clock, SystemClock
from parley.config import Settings
from parley.db.database import Database
from parley.services import Context

DESCRIPTION = (
    "Parley hosts voice conversations between end users and configurable agents. "
    "Every error answers `{\"error\": {\"message\", \"code\"}}`."
)


def create_app(settings: Settings, *, clock: Clock | None = None) -> FastAPI:
    """Build the ASGI application; resources open in its lifespan, not at import."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database.from_url(settings.database_url)
        app.state.context = Context(db=database, clock=clock or SystemClock())
        try:
            yield
        finally:
            await database.dispose()

    app = FastAPI(
        title="Parley",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    install_error_handlers(app)
    for router in (health.router, api_keys.router, projects.router, agents.router):
        app.include_router(router)

    def openapi() -> dict[str, Any]:
        return build_openapi(app)

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AccessLogMiddleware)
    return app


def create_app_from_env() -> FastAPI:
    """Build the app from the environment: the factory uvicorn workers call."""
    return create_app(Settings())
