"""`GET /metrics` and the middleware that counts requests by route template.

Off unless PARLEY_METRICS=true. With PARLEY_METRICS_TOKEN set, a scrape must carry
`Authorization: Bearer <token>` (`services.authn.authenticate_scrape`: compared in constant
time); without it, /metrics is open to whoever reaches the port, so expose it only on a
private network.
"""

from __future__ import annotations

import time

from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from parley import metrics
from parley.api.client_faults import unanswered_status
from parley.services.authn import authenticate_scrape

UNMATCHED = "unmatched"


def route_template(scope: Scope) -> str:
    """The template of the route that answered (`/v1/agents/{nameOrId}`), never the path;
    for the files of a mount, its prefix (`/examples/{path}`)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path or "/"
    app_root = scope.get("app_root_path")  # set by a Mount that matched, with root_path
    if isinstance(app_root, str):
        prefix = str(scope.get("root_path", ""))[len(app_root) :]
        if prefix:
            return f"{prefix}/{{path}}"
    return UNMATCHED


class MetricsMiddleware:
    """Count every HTTP request and WebSocket handshake by method, route template, status;
    one the app did not answer by what its client got (`client_faults.unanswered_status`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET") if scope["type"] == "http" else "WS"
        started = time.perf_counter()
        status = 0
        observed = False

        def observe(code: int) -> None:
            nonlocal observed
            if not observed:
                observed = True
                elapsed = time.perf_counter() - started
                metrics.observe_request(method, route_template(scope), code, elapsed)

        async def counting_send(message: Message) -> None:
            nonlocal status
            kind = message["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                status = int(message["status"])
                if kind.startswith("websocket"):
                    observe(status)  # a refused handshake
            elif kind == "websocket.accept":
                observe(101)  # counted when accepted, not when the conversation ends
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            observe(status or unanswered_status(scope))


def install_metrics(app: FastAPI, *, token: str | None) -> None:
    """Serve the app's registry at /metrics and count requests (call only when enabled)."""
    app.add_middleware(MetricsMiddleware)

    async def scrape(request: Request) -> Response:
        authenticate_scrape(request.headers.getlist("authorization"), token=token)
        collected: metrics.Metrics = request.app.state.metrics
        return Response(collected.render(), media_type=metrics.CONTENT_TYPE)

    app.add_api_route("/metrics", scrape, methods=["GET"], include_in_schema=False)
