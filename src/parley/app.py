"""The composition root: `create_app(settings)` wires settings, database, stores and routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from parley import __version__, metrics
from parley.api import log_hygiene, telephony_ws, ws
from parley.api.connection_limits import ConnectionLimits
from parley.api.docs import install_docs
from parley.api.errors import install_error_handlers
from parley.api.examples import install_examples
from parley.api.http_protocol import HTTPTOOLS_PROTOCOL, http_protocol_factory
from parley.api.metrics import install_metrics
from parley.api.middleware import AccessLogMiddleware, BodyLimitMiddleware
from parley.api.openapi import build_openapi
from parley.api.routes import (
    agents,
    analysis,
    api_keys,
    audit_events,
    auth_jwt,
    conversation_tokens,
    conversations,
    extraction_schemas,
    health,
    projects,
    responses,
    scenarios,
    session_tokens,
    sip,
    storage_policies,
    telephony,
    tools,
    tts,
    voices,
    webhooks,
    workspace,
)
from parley.api.uvicorn_ws import WS_PROTOCOL
from parley.clock import Clock, SystemClock
from parley.composition.context import open_context
from parley.composition.heap import freeze_startup_heap, lean_log_records
from parley.composition.options import engine_options, runtime_options
from parley.composition.scenario_dialer import WebSocketDialer
from parley.composition.webhook_sender import SenderAddress, handing_to_sender
from parley.config import Settings, trusted_proxy_list
from parley.engine import EngineFactory, build_engine_factory
from parley.services.housekeeping import housekeeping
from parley.services.scenario_runner import scenario_runner
from parley.services.webhook_delivery import WorkerOptions, delivery_worker
from parley.web import install_dashboard

HTTP_PROTOCOL = HTTPTOOLS_PROTOCOL
"""uvicorn's `http=` by name: httptools, answering malformed requests with the error
envelope (default limits; `parley serve` uses `http_protocol(settings)`)."""

__all__ = ["HTTP_PROTOCOL", "WS_PROTOCOL", "create_app", "create_app_from_env", "http_protocol"]


def http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """uvicorn's `http=` for `parley serve`: HTTP_PROTOCOL with the settings' time-outs and
    connection caps (docs/reliability.md)."""
    return http_protocol_factory(
        ConnectionLimits(
            header_timeout=settings.http_header_timeout_seconds,
            body_timeout=settings.http_body_timeout_seconds,
            max_connections=settings.max_connections,
            max_connections_per_client=settings.max_connections_per_client,
            trusted_proxies=tuple(trusted_proxy_list(settings.trusted_proxies)),
        )
    )


DESCRIPTION = (
    "Parley hosts voice conversations between end users and configurable agents. "
    'Every error answers `{"error": {"message", "code"}}`.'
)


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    engine_factory: EngineFactory | None = None,
    freeze_heap: bool = False,
) -> FastAPI:
    """Build the ASGI application; resources open in its lifespan, not at import.

    `freeze_heap`: once started, freeze what was allocated so far
    (composition/heap.py): for a server process, not for tests that build many apps.
    """

    collected = metrics.Metrics() if settings.metrics else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if collected is not None:
                stack.enter_context(metrics.activate(collected))
            ctx = await stack.enter_async_context(
                open_context(runtime_options(settings), clock=clock or SystemClock())
            )
            app.state.context = ctx
            app.state.timer = await stack.enter_async_context(housekeeping(ctx))
            # Events out (API.md 14): under `parley serve` the instance's webhook sender
            # process sends them; otherwise this process's worker (stopped first).
            if (sender := SenderAddress.from_environment()) is not None:
                await stack.enter_async_context(handing_to_sender(ctx, sender))
            else:
                worker = WorkerOptions(retry_schedule=settings.retry_schedule)
                app.state.webhook_worker = await stack.enter_async_context(
                    delivery_worker(ctx, worker)
                )
            factory = engine_factory or build_engine_factory(engine_options(settings))
            app.state.engine_factory = factory
            # Models load before the server answers anything, /health included: ready means
            # ready to hold a conversation.
            await factory.warm_up()
            # Test runs (API.md 19): this instance's runner dials its own socket.
            app.state.scenario_runner = await stack.enter_async_context(
                scenario_runner(
                    ctx,
                    dialer=WebSocketDialer(),
                    synthesizer=getattr(factory, "synthesizer", None),
                )
            )
            if freeze_heap:
                freeze_startup_heap()
            try:
                yield
            finally:
                if engine_factory is None:
                    await factory.aclose()

    app = FastAPI(
        title="Parley",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by install_docs, from packaged assets
        redoc_url=None,
        openapi_url="/openapi.json",
        # `/v1/agents/` is an unknown path (404 in the envelope), not a 307 whose Location
        # Starlette builds from the client's Host header.
        redirect_slashes=False,
    )
    install_error_handlers(app)
    install_docs(app)
    install_examples(app)
    log_hygiene.install()
    # Served bare and first: no FastAPI machinery, no other route tried before them.
    app.router.routes[0:0] = [health.route, ws.route]
    routers = (
        api_keys.router,
        audit_events.router,
        projects.router,
        workspace.router,
        agents.router,
        voices.router,
        tts.router,
        tools.router,
        storage_policies.router,
        extraction_schemas.router,
        webhooks.router,
        auth_jwt.router,
        session_tokens.router,
        conversation_tokens.router,
        sip.router,
        conversations.router,
        analysis.router,
        scenarios.router,
        responses.router,
        telephony.router,
        telephony_ws.router,
    )
    for router in routers:
        # Flat, as `app.add_api_route` would add them: FastAPI 0.165's `include_router`
        # wraps each router in a layer that matches a request against every route of every
        # earlier router (scope keys set and restored each time), a sixth of the event
        # loop's time on a JWT read (docs/performance.md, session 12). The routers carry
        # their prefixes and tags themselves; none has dependencies of its own.
        app.router.routes.extend(router.routes)

    def openapi() -> dict[str, Any]:
        return build_openapi(app, unmounted=(health.described,))

    app.openapi = openapi  # type: ignore[method-assign]
    install_dashboard(app, secure_cookies=settings.public_url.startswith("https://"))
    app.add_middleware(BodyLimitMiddleware)
    app.add_middleware(AccessLogMiddleware)
    app.state.metrics = collected
    if collected is not None:
        install_metrics(app, token=settings.metrics_token)
    return app


def create_app_from_env() -> FastAPI:
    """Build the app from the environment: the factory uvicorn workers call, in a server
    process (its heap frozen once started, its log records lean)."""
    lean_log_records()
    return create_app(Settings(), freeze_heap=True)
