"""No request pays a thread-pool hop for a dependency (issue #11: the fast request path)."""

from __future__ import annotations

import inspect
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIWebSocketRoute

from parley.app import create_app


def _calls(dependant: Dependant) -> list[object]:
    found: list[object] = []
    for sub in dependant.dependencies:
        found.append(sub.call)
        found.extend(_calls(sub))
    return found


def _routes(routes: list[Any]) -> list[Any]:
    """Every route, those of included routers too (FastAPI keeps those inside them)."""
    found: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        found.extend(_routes(included.routes) if included is not None else [route])
    return found


def test_no_dependency_runs_in_the_thread_pool(settings_factory: Any) -> None:
    """FastAPI runs a plain `def` dependency or endpoint in its thread pool: every one of
    ours is `async def`, so a request never waits for a worker thread."""
    app = create_app(settings_factory())
    checked = 0
    for route in _routes(app.routes):
        if not isinstance(route, APIRoute | APIWebSocketRoute):
            continue
        for call in [route.endpoint, *_calls(route.dependant)]:
            checked += 1
            assert inspect.iscoroutinefunction(call), f"{route.path}: {call!r} is not async"
    assert checked > 50
