"""Readiness: the dependencies answer."""

from __future__ import annotations

from parley.services.context import Context


async def check(ctx: Context) -> str:
    """Return the database's dialect name; raise Unavailable unless it answers."""
    await ctx.db.check_health()
    return ctx.db.dialect
