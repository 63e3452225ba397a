"""Routes served by Starlette alone, for the hottest entry points (`GET /health`, the
conversation WebSocket): no FastAPI dependency solving, exit stacks or response models, and
placed first in the app, so no other route is tried before them (docs/performance.md).

Each still puts itself in the scope as FastAPI's routes do, so the metrics label its
requests and handshakes with its template (api/metrics.py); every middleware still runs.
"""

from __future__ import annotations

from starlette.routing import Match, Route, WebSocketRoute
from starlette.types import Scope


class BareRoute(Route):
    """An HTTP route served by Starlette alone."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self
        return match, child_scope


class BareWebSocketRoute(WebSocketRoute):
    """A WebSocket route served by Starlette alone."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self
        return match, child_scope
