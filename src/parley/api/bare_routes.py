"""Routes served by Starlette alone, for the hottest entry points (`GET /health`, the
conversation WebSocket): no FastAPI dependency solving, exit stacks or response models, and
placed first in the app, so no other route is tried before them (docs/performance.md).

Each still puts itself in the scope as FastAPI's routes do, so the metrics label its
requests and handshakes with its template (api/metrics.py); every middleware still runs.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Match, Route, WebSocketRoute
from starlette.types import Scope


class BareRoute(Route):
    """An HTTP route served by Starlette alone."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        return _named(self, *super().matches(scope))


class BareWebSocketRoute(WebSocketRoute):
    """A WebSocket route served by Starlette alone."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        return _named(self, *super().matches(scope))


def _named(route: BaseRoute, match: Match, child_scope: Scope) -> tuple[Match, Scope]:
    """Put `route` in the scope of a request it matches, as FastAPI's routes do."""
    if match is not Match.NONE:
        child_scope["route"] = route
    return match, child_scope
