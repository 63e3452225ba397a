"""Leases on live conversations: none outlives the process that served it.

Each instance (one `parley serve` process) has a row whose heartbeat it renews a few times
per lease; a live conversation names the instance serving it. Every instance, on start-up
and then on a timer, ends the live conversations whose owner's heartbeat is older than the
lease (it was killed, lost power or lost the database): status `ended`, items kept. An
instance restarted under the same name (`PARLEY_INSTANCE_ID`, by default host and port)
ends its previous life's conversations at once. Ended orphans are announced on the shared
store, so a socket still open on a cut-off instance closes too. Each conversation ended
here is announced (conversation.ended) in the transaction that ends it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import instances as instance_repo
from parley.records import Status
from parley.services import endings
from parley.services.context import Context

log = logging.getLogger(__name__)


async def start(ctx: Context) -> int:
    """Register this instance, end its previous life's conversations and any orphans."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        await instance_repo.register(session, ctx.instance.id, at=now)
    return await end_orphans(ctx, including_own=True)


async def renew(ctx: Context) -> None:
    """Renew this instance's lease (register again if another instance forgot it)."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        if not await instance_repo.beat(session, ctx.instance.id, at=now):
            await instance_repo.register(session, ctx.instance.id, at=now)


async def end_orphans(ctx: Context, *, including_own: bool = False) -> int:
    """End live conversations whose owner's lease ran out; return how many."""
    now = utcnow(ctx.clock)
    stale_before = now - timedelta(seconds=ctx.instance.lease_seconds)
    async with ctx.db.transaction() as session:
        orphans = await conversation_repo.live_where(
            session,
            owned_by=ctx.instance.id if including_own else None,
            stale_before=stale_before,
            sparing=None if including_own else ctx.instance.id,
        )
        await instance_repo.forget_stale(session, before=stale_before)
    ended = await endings.end_each(ctx, orphans, endings.ORPHAN, only_from=Status.LIVE)
    if ended:
        log.warning("ended %d live conversations whose instance is gone", ended)
    return ended


async def stop(ctx: Context) -> None:
    """Retire this instance at a clean shutdown; its conversations were ended already."""
    async with ctx.db.read() as session:
        own = await conversation_repo.live_where(session, owned_by=ctx.instance.id)
    await endings.end_each(ctx, own, endings.INSTANCE_STOPPED, only_from=Status.LIVE)
    async with ctx.db.transaction() as session:
        await instance_repo.retire(session, ctx.instance.id)
