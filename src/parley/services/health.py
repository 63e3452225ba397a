"""Readiness: the dependencies answer: the database and, in a fleet, Redis."""

from __future__ import annotations

from parley.services.context import Context


async def check(ctx: Context) -> str:
    """Return the database's dialect name; raise Unavailable unless it and the shared stores
    answer (a fleet whose Redis is gone refuses every JWT: it is not ready)."""
    await ctx.db.check_health()
    await ctx.store_health.check()
    return ctx.db.dialect
