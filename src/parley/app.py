"""The composition root: `create_app(settings)` wires settings, database, stores and routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from parley import __version__
from parley.api import log_hygiene, ws
from parley.api.errors import install_error_handlers
from parley.api.http_protocol import HTTPTOOLS_PROTOCOL
from parley.api.middleware import AccessLogMiddleware, BodyLimitMiddleware
from parley.api.openapi import build_openapi
from parley.api.routes import (
    agents,
    api_keys,
    auth_jwt,
    conversations,
    health,
    projects,
    session_tokens,
)
from parley.clock import Clock, SystemClock
from parley.config import Settings
from parley.engine import EngineFactory, load_engine_factory
from parley.services.runtime import RuntimeOptions, open_context

HTTP_PROTOCOL = HTTPTOOLS_PROTOCOL
"""uvicorn's `http=` for `parley serve`: httptools, answering malformed requests with the
error envelope."""

DESCRIPTION = (
    "Parley hosts voice conversations between end users and configurable agents. "
    'Every error answers `{"error": {"message", "code"}}`.'
)


def create_app(
    settings: Settings, *, clock: Clock | None = None, engine_factory: EngineFactory | None = None
) -> FastAPI:
    """Build the ASGI application; resources open in its lifespan, not at import."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_context(runtime_options(settings), clock=clock or SystemClock()) as ctx:
            app.state.context = ctx
            app.state.engine_factory = engine_factory or load_engine_factory()
            # The voice loads once per process; warm it while the first requests arrive.
            warming = asyncio.create_task(app.state.engine_factory.warm_up())
            try:
                yield
            finally:
                warming.cancel()

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
    log_hygiene.install()
    routers = (
        health.router,
        api_keys.router,
        projects.router,
        agents.router,
        auth_jwt.router,
        session_tokens.router,
        conversations.router,
        ws.router,
    )
    for router in routers:
        app.include_router(router)

    def openapi() -> dict[str, Any]:
        return build_openapi(app)

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AccessLogMiddleware)
    return app


def runtime_options(settings: Settings) -> RuntimeOptions:
    """Hand the services the plain values they need from the configuration."""
    return RuntimeOptions(
        database_url=settings.database_url,
        redis_url=settings.redis_url,
        default_audience=settings.public_host,
        jwks_allow_http=settings.jwks_allow_http,
        jwks_allow_private_networks=settings.jwks_allow_private_networks,
        jwt_max_lifetime_seconds=settings.jwt_max_lifetime_seconds,
        jwt_rate_per_minute=settings.jwt_rate_per_minute,
        jwt_rate_burst=settings.jwt_rate_burst,
        database_connect_timeout_seconds=settings.database_connect_timeout_seconds,
        database_statement_timeout_seconds=settings.database_statement_timeout_seconds,
        database_pool_timeout_seconds=settings.database_pool_timeout_seconds,
    )


def create_app_from_env() -> FastAPI:
    """Build the app from the environment: the factory uvicorn workers call."""
    return create_app(Settings())
