"""Webhook endpoints of an organization (API.md section 14).

Rules:
1. `url` follows the rules of webhook tools: https on a public address unless the operator
   allows otherwise (`AddressPolicy.static_refusal`, 400 naming `url`); resolved addresses
   are checked again at each delivery.
2. `event_types` names known types only (400 naming the unknown one); none given, or null,
   means all seven, listed. An empty list is refused: a webhook receives something.
3. The secret (`whsec_` + base64 of 32 random bytes) is stored sealed and shown once, at
   creation or rotation. After a rotation the previous secret signs too for 24 h.
4. `is_disabled: true` stops deliveries (pending ones wait); `false` re-enables. A 410 from
   the endpoint disables it too (services/webhook_delivery.py).
5. Another organization's webhook does not exist (404). Every change is audited.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final, NoReturn

from parley.clock import utcnow
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.db.repos import webhooks as webhook_repo
from parley.db.session import Session
from parley.errors import ValidationFailed
from parley.ids import new_id
from parley.outbound import AddressPolicy, new_signing_secret
from parley.records import (
    Actor,
    IssuedWebhook,
    Page,
    Unset,
    Webhook,
    WebhookDelivery,
    WebhookPatch,
)
from parley.services import audit
from parley.services.context import Context
from parley.services.events import EVENT_TYPES
from parley.services.paging import page_of

__all__ = [
    "ROTATION_OVERLAP",
    "create_webhook",
    "delete_webhook",
    "get_webhook",
    "list_deliveries",
    "list_webhooks",
    "retry_delivery",
    "rotate_secret",
    "update_webhook",
]

ROTATION_OVERLAP: Final = timedelta(hours=24)
"""How long the previous secret keeps signing after a rotation (rule 3)."""


async def create_webhook(
    ctx: Context,
    *,
    org_id: str,
    url: str,
    event_types: Sequence[str] | None,
    description: str,
    actor: Actor,
) -> IssuedWebhook:
    """Create a webhook; its secret is returned this once."""
    checked_url(url, ctx.outbound_policy)
    types = checked_event_types(event_types)
    secret = new_signing_secret()
    async with ctx.db.transaction() as session:
        webhook = await webhook_repo.insert(
            session,
            webhook_id=new_id("wh"),
            org_id=org_id,
            url=url,
            event_types=types,
            description=description,
            secret_sealed=ctx.secrets.seal(secret),
            now=utcnow(ctx.clock),
        )
        await _record(session, ctx, webhook, actor, "webhook.create", url=url)
    return IssuedWebhook(webhook=webhook, secret=secret)


async def get_webhook(ctx: Context, *, org_id: str, webhook_id: str) -> Webhook:
    """Return one webhook of the organization."""
    async with ctx.db.read() as session:
        return await webhook_repo.find(session, org_id, webhook_id)


async def list_webhooks(ctx: Context, *, org_id: str) -> list[Webhook]:
    """The organization's webhooks, oldest first."""
    async with ctx.db.read() as session:
        return await webhook_repo.list_all(session, org_id)


async def update_webhook(
    ctx: Context, *, org_id: str, webhook_id: str, patch: WebhookPatch, actor: Actor
) -> Webhook:
    """Apply a partial update (rules 1, 2 and 4); return the webhook it makes."""
    changes: dict[str, Any] = {}
    if not isinstance(patch.url, Unset):
        changes["url"] = checked_url(patch.url, ctx.outbound_policy)
    if not isinstance(patch.event_types, Unset):
        changes["event_types"] = list(checked_event_types(patch.event_types))
    if not isinstance(patch.description, Unset):
        changes["description"] = patch.description
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        webhook = await webhook_repo.find(session, org_id, webhook_id, for_update=True)
        if not isinstance(patch.is_disabled, Unset) and patch.is_disabled != webhook.is_disabled:
            changes["disabled_at"] = now if patch.is_disabled else None
        if changes:
            await webhook_repo.apply_changes(session, webhook.id, **changes, updated_at=now)
        fields = sorted(name for name in WebhookPatch.__slots__ if _set(patch, name))
        await _record(session, ctx, webhook, actor, "webhook.update", fields=fields)
        updated = await webhook_repo.find(session, org_id, webhook.id)
    if "disabled_at" in changes and not patch.is_disabled:
        ctx.outbox_bell.ring(poll=True)  # its pending deliveries are due again
    return updated


async def delete_webhook(ctx: Context, *, org_id: str, webhook_id: str, actor: Actor) -> None:
    """Delete a webhook and its deliveries."""
    async with ctx.db.transaction() as session:
        webhook = await webhook_repo.find(session, org_id, webhook_id, for_update=True)
        await _record(session, ctx, webhook, actor, "webhook.delete", url=webhook.url)
        await webhook_repo.delete_row(session, webhook.id)


async def rotate_secret(ctx: Context, *, org_id: str, webhook_id: str, actor: Actor) -> str:
    """Give the webhook a new secret, returned this once; the current one keeps signing for
    24 h beside it (rule 3), and any older one stops."""
    secret = new_signing_secret()
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        webhook = await webhook_repo.find(session, org_id, webhook_id, for_update=True)
        current = await webhook_repo.secret_of(session, webhook.id)
        await webhook_repo.set_secrets(
            session,
            webhook.id,
            secret_sealed=ctx.secrets.seal(secret),
            previous_sealed=current,
            previous_expires_at=now + ROTATION_OVERLAP,
            now=now,
        )
        await _record(session, ctx, webhook, actor, "webhook.rotate_secret")
    return secret


async def list_deliveries(
    ctx: Context, *, org_id: str, webhook_id: str, cursor: str | None, limit: int
) -> Page[WebhookDelivery]:
    """The webhook's deliveries, newest first."""
    async with ctx.db.read() as session:
        webhook = await webhook_repo.find(session, org_id, webhook_id)
        found = await delivery_repo.list_page(session, webhook.id, cursor=cursor, limit=limit)
    return page_of(found, limit=limit)


async def retry_delivery(
    ctx: Context, *, org_id: str, webhook_id: str, msg_id: str
) -> WebhookDelivery:
    """Send a delivery again now: it becomes `pending` and due at once, for one more attempt
    (a failed one fails again after it, without the schedule's waits). 404 for an unknown
    one."""
    async with ctx.db.transaction() as session:
        webhook = await webhook_repo.find(session, org_id, webhook_id)
        await delivery_repo.find(session, webhook.id, msg_id)
        await delivery_repo.make_due(session, msg_id, at=utcnow(ctx.clock))
        retried = await delivery_repo.find(session, webhook.id, msg_id)
    ctx.outbox_bell.ring(poll=True)
    return retried


def checked_url(url: str, policy: AddressPolicy) -> str:
    """Refuse a URL that webhook tools could not call (rule 1)."""
    if refusal := policy.static_refusal(url):
        _refuse("url", refusal)
    return url


def checked_event_types(event_types: Sequence[str] | None) -> tuple[str, ...]:
    """The event types a webhook receives, in the API's order (rule 2)."""
    if event_types is None:
        return EVENT_TYPES
    if not event_types:
        _refuse("event_types", "must name at least one event type (omit it for all)")
    for name in event_types:
        if name not in EVENT_TYPES:
            _refuse(
                "event_types",
                f"unknown event type {name!r}: the types are " + ", ".join(EVENT_TYPES),
            )
    return tuple(name for name in EVENT_TYPES if name in set(event_types))


def previous_secret_valid(expires_at: datetime | None, now: datetime) -> bool:
    """Whether a rotated-out secret still signs at `now`."""
    return expires_at is not None and now < expires_at


def _refuse(field: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={field: message})


def _set(patch: WebhookPatch, name: str) -> bool:
    return not isinstance(getattr(patch, name), Unset)


async def _record(
    session: Session, ctx: Context, webhook: Webhook, actor: Actor, action: str, **details: object
) -> None:
    await audit.record(
        session,
        ctx,
        org_id=webhook.org_id,
        actor=actor,
        action=action,
        target=webhook.id,
        details=dict(details),
    )
