"""Liveness and readiness, without a credential."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from parley.api.deps import Ctx
from parley.api.schemas import error_responses
from parley.services import health

router = APIRouter(tags=["health"])


class HealthOut(BaseModel):
    status: str
    database: str


@router.get("/health", response_model=HealthOut, responses=error_responses(503))
async def get_health(ctx: Ctx) -> HealthOut:
    """Answer 200 when the service and its database respond, else 503."""
    return HealthOut(status="ok", database=await health.check(ctx))
