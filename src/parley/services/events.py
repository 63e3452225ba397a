"""Events out (API.md section 14): each event is written to the outbox in the transaction
of the change it reports, one delivery (its own `msg_…`) per enabled webhook of the
organization that receives its type. A change that rolls back leaves no delivery; a commit
rings the worker's bell (services/webhook_delivery.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Final

from parley.clock import isoformat, utcnow
from parley.db.database import after_commit
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.db.repos import webhooks as webhook_repo
from parley.db.session import Session
from parley.ids import new_id
from parley.records import DueDelivery
from parley.services.context import Context

LEASE_SECONDS: Final = 60.0
"""A claim's lease: far longer than a send (15 s), so a live claimer never loses one; a
dead claimer's deliveries are claimed again after it (or at its restart)."""
EVENT_TYPES: Final = (
    "conversation.started",
    "conversation.ended",
    "conversation.transferred",
    "conversation.analysis",
    "agent.created",
    "agent.updated",
    "agent.disabled",
    "agent.enabled",
    "agent.deleted",
    "test_run.completed",
)

EventData = Callable[[], Awaitable[dict[str, Any]]]
"""Builds an event's `data` from the records in the transaction: called only when a
webhook receives the event, so a change nobody listens to costs one small query."""


async def emit(
    session: Session, ctx: Context, *, org_id: str, event_type: str, data: EventData
) -> int:
    """Write the event's deliveries in the caller's transaction; return how many.

    While a worker takes hand-overs (this process's, or the instance's webhook sender),
    each delivery is claimed for it in this very transaction and handed over after the
    commit (services/outbox_bell.py); otherwise, or past the hand-over's bound, it waits in
    the outbox for any worker's claim.
    """
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    targets = await webhook_repo.enabled_for(session, org_id, event_type)
    if not targets:
        return 0
    now = utcnow(ctx.clock)
    payload = await data()
    bell = ctx.outbox_bell
    handed: list[DueDelivery] = []
    for target in targets:
        msg_id = new_id("msg")
        body = json.dumps(
            {"id": msg_id, "event_type": event_type, "created_at": isoformat(now), "data": payload},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        mine = bell.accepts(target.id)
        await delivery_repo.insert(
            session,
            msg_id=msg_id,
            webhook_id=target.id,
            org_id=org_id,
            event_type=event_type,
            body=body,
            now=now,
            claimed_by=bell.claimer if mine else None,
            claimed_until=now + timedelta(seconds=LEASE_SECONDS) if mine else None,
        )
        if mine:
            handed.append(
                DueDelivery(
                    id=msg_id,
                    webhook_id=target.id,
                    org_id=org_id,
                    url=target.url,
                    body=body,
                    attempts=0,
                    secret_sealed=target.secret_sealed,
                    previous_secret_sealed=target.previous_secret_sealed,
                    previous_secret_expires_at=target.previous_secret_expires_at,
                )
            )
    after_commit(session, lambda: bell.hand_over(handed))
    return len(targets)
