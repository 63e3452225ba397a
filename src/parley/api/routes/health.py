"""Liveness and readiness, without a credential.

`GET /health` is served by a plain Starlette route (`route`, api/bare_routes.py): a probe
has no parameters, no body and one fixed answer, so FastAPI's per-request machinery
(dependency solving, two exit stacks, response-model validation) was about 60 of its 176 µs
a request, measured under wrk (docs/performance.md, session 12). It is described in the
OpenAPI document by `described`, an `APIRoute` over the same endpoint that is never mounted.
"""

from __future__ import annotations

from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from parley.api.bare_routes import BareRoute
from parley.api.deps import context_of
from parley.api.schemas import error_responses
from parley.services import health


class HealthOut(BaseModel):
    status: str
    database: str


async def get_health(request: Request) -> Response:
    """Answer 200 when the service and its database respond, else 503."""
    database = await health.check(context_of(request))
    body = HealthOut(status="ok", database=database).model_dump_json()
    return Response(body, media_type="application/json")


route = BareRoute("/health", get_health, methods=["GET"])
"""The route that answers (the app's first, so no other route is tried before it)."""

described = APIRoute(
    "/health",
    get_health,
    methods=["GET"],
    response_model=HealthOut,
    responses=error_responses(503),
    tags=["health"],
)
"""The same operation as FastAPI documents it, for the OpenAPI document only."""
