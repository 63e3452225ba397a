"""Events out (API.md section 14): each event is written to the outbox in the transaction
of the change it reports, one delivery (its own `msg_…`) per enabled webhook of the
organization that receives its type. A change that rolls back leaves no delivery; a commit
rings the worker's bell (services/webhook_delivery.py).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Final

from parley.clock import isoformat, utcnow
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.db.repos import webhooks as webhook_repo
from parley.db.session import Session
from parley.ids import new_id
from parley.services.context import Context

EVENT_TYPES: Final = (
    "conversation.started",
    "conversation.ended",
    "agent.created",
    "agent.updated",
    "agent.disabled",
    "agent.enabled",
    "agent.deleted",
)

EventData = Callable[[], Awaitable[dict[str, Any]]]
"""Builds an event's `data` from the records in the transaction: called only when a
webhook receives the event, so a change nobody listens to costs one small query."""


async def emit(
    session: Session, ctx: Context, *, org_id: str, event_type: str, data: EventData
) -> int:
    """Write the event's deliveries in the caller's transaction; return how many."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    webhook_ids = await webhook_repo.enabled_for(session, org_id, event_type)
    if not webhook_ids:
        return 0
    now = utcnow(ctx.clock)
    payload = await data()
    for webhook_id in webhook_ids:
        msg_id = new_id("msg")
        body = {
            "id": msg_id,
            "event_type": event_type,
            "created_at": isoformat(now),
            "data": payload,
        }
        delivery_repo.insert(
            session,
            msg_id=msg_id,
            webhook_id=webhook_id,
            org_id=org_id,
            event_type=event_type,
            body=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
            now=now,
        )
    delivery_repo.after_commit(session, ctx.outbox_bell.ring)
    return len(webhook_ids)
