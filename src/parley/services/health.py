"""Readiness: the dependencies answer: the database, for reads and writes, and, in a fleet,
Redis."""

from __future__ import annotations

from parley.clock import utcnow
from parley.db.repos import instances as instance_repo
from parley.db.session import DirectConnection, Session
from parley.services.context import Context


async def check(ctx: Context) -> str:
    """Return the database's dialect name; raise Unavailable unless it and the shared stores
    answer (a fleet whose Redis is gone refuses every JWT: it is not ready).

    A database that answers reads but refuses writes (a full disk) is not ready either: the
    check renews this instance's heartbeat, the write the instance makes anyway
    (services/instances.py), and a full disk answers 503 naming the cause.
    """
    await ctx.db.check_health()

    async def beat(session: Session) -> None:
        await instance_repo.beat(session, ctx.instance.id, at=utcnow(ctx.clock))

    def beat_directly(core: DirectConnection) -> None:
        instance_repo.beat_directly(core, ctx.instance.id, at=utcnow(ctx.clock))

    # A burst of checks shares one write.
    await ctx.db.check_writable("heartbeat", beat, directly=beat_directly)
    await ctx.store_health.check()
    return ctx.db.dialect
