"""Revocations that reach every instance even when the shared store is down for a while.

A revocation (a session token revoked, a conversation ended) is committed in the database
together with a pending entry for the shared Revocations store, which tells live sockets on
every instance. The answer then tells the truth: the change is made. Publishing follows
the commit; when the store is down, the entry waits and housekeeping publishes it once the
store is back, so those sockets close then (and sooner, with 1011, if the outage outlasts
the revocation bound: services/live/watchdog.py). Publishing twice is harmless.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from parley.clock import utcnow
from parley.db.repos import pending_revocations as pending_repo
from parley.db.session import Session
from parley.errors import Unavailable
from parley.services.context import Context, DatabaseContext

log = logging.getLogger(__name__)

PUBLISH_BATCH = 200


@dataclass(frozen=True, slots=True)
class Pending:
    """A committed revocation not yet known to the shared store."""

    id: int
    credential_id: str
    expires_at: float


async def queue(
    session: Session, ctx: DatabaseContext, credential_id: str, *, expires_at: float
) -> Pending:
    """Queue a revocation inside the transaction of the change it announces."""
    queued = await pending_repo.add(
        session, credential_id, expires_at=expires_at, at=utcnow(ctx.clock)
    )
    return Pending(queued.id, credential_id, expires_at)


async def publish(ctx: Context, pending: Pending) -> bool:
    """Tell the shared store now; on an outage leave it queued. True once published."""
    try:
        await ctx.revocations.revoke(pending.credential_id, expires_at=pending.expires_at)
    except Unavailable:
        log.warning("revocation store unavailable: a revocation waits to be published")
        return False
    try:
        async with ctx.db.transaction() as session:
            await pending_repo.remove(session, [pending.id])
    except Unavailable:
        # Published; the entry stays and is published again later, which changes nothing.
        log.warning("revocation published, but its pending entry could not be removed yet")
    return True


async def publish_pending(ctx: Context) -> int:
    """Publish what waits (oldest first); return how many. Raises Unavailable if a store is."""
    async with ctx.db.read() as session:
        queued = await pending_repo.oldest(session, limit=PUBLISH_BATCH)
    waiting = [Pending(entry.id, entry.credential_id, entry.expires_at) for entry in queued]
    for entry in waiting:
        await ctx.revocations.revoke(entry.credential_id, expires_at=entry.expires_at)
    if waiting:
        async with ctx.db.transaction() as session:
            await pending_repo.remove(session, [entry.id for entry in waiting])
        log.info("published %d revocations that waited for the store", len(waiting))
    return len(waiting)
