"""Webhook endpoints of organizations (API.md section 14).

Secrets are stored sealed; this module never sees one in clear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import WebhookRow
from parley.errors import WebhookNotFound
from parley.ids import looks_like_id
from parley.records import Webhook


def to_record(row: WebhookRow) -> Webhook:
    return Webhook(
        id=row.id,
        org_id=row.org_id,
        url=row.url,
        event_types=tuple(row.event_types),
        description=row.description,
        disabled_at=row.disabled_at,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def insert(
    session: AsyncSession,
    *,
    webhook_id: str,
    org_id: str,
    url: str,
    event_types: tuple[str, ...],
    description: str,
    secret_sealed: str,
    now: datetime,
) -> Webhook:
    row = WebhookRow(
        id=webhook_id,
        org_id=org_id,
        url=url,
        event_types=list(event_types),
        description=description,
        secret_sealed=secret_sealed,
        previous_secret_sealed=None,
        previous_secret_expires_at=None,
        disabled_at=None,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    return to_record(row)


async def find(
    session: AsyncSession, org_id: str, webhook_id: str, *, for_update: bool = False
) -> Webhook:
    """Return the organization's webhook; WebhookNotFound for any other ID (another
    organization's included: its webhooks do not exist for this one)."""
    if not looks_like_id(webhook_id, "wh"):
        raise WebhookNotFound()
    query = select(WebhookRow).where(WebhookRow.id == webhook_id, WebhookRow.org_id == org_id)
    if for_update:
        query = query.with_for_update()
    row = await session.scalar(query.execution_options(populate_existing=True))
    if row is None:
        raise WebhookNotFound()
    return to_record(row)


async def list_all(session: AsyncSession, org_id: str) -> list[Webhook]:
    """The organization's webhooks, oldest first."""
    rows = await session.scalars(
        select(WebhookRow)
        .where(WebhookRow.org_id == org_id)
        .order_by(WebhookRow.created_at, WebhookRow.id)
    )
    return [to_record(row) for row in rows]


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where and how an event is sent: a webhook's URL and sealed secrets."""

    id: str
    url: str
    secret_sealed: str
    previous_secret_sealed: str | None
    previous_secret_expires_at: datetime | None


async def enabled_for(session: AsyncSession, org_id: str, event_type: str) -> list[WebhookTarget]:
    """The organization's enabled webhooks that receive `event_type`."""
    rows = await session.scalars(
        select(WebhookRow).where(WebhookRow.org_id == org_id, WebhookRow.disabled_at.is_(None))
    )
    # A handful of webhooks per organization: the filter on a JSON list is done here, the
    # same way on every database.
    return [
        WebhookTarget(
            id=row.id,
            url=row.url,
            secret_sealed=row.secret_sealed,
            previous_secret_sealed=row.previous_secret_sealed,
            previous_secret_expires_at=row.previous_secret_expires_at,
        )
        for row in rows
        if event_type in row.event_types
    ]


async def apply_changes(session: AsyncSession, webhook_id: str, **values: Any) -> None:
    """UPDATE the given columns of one webhook."""
    await session.execute(update(WebhookRow).where(WebhookRow.id == webhook_id).values(**values))


async def set_secrets(
    session: AsyncSession,
    webhook_id: str,
    *,
    secret_sealed: str,
    previous_sealed: str | None,
    previous_expires_at: datetime | None,
    now: datetime,
) -> None:
    await apply_changes(
        session,
        webhook_id,
        secret_sealed=secret_sealed,
        previous_secret_sealed=previous_sealed,
        previous_secret_expires_at=previous_expires_at,
        updated_at=now,
    )


async def secret_of(session: AsyncSession, webhook_id: str) -> str:
    """The sealed current secret of a webhook."""
    sealed = await session.scalar(
        select(WebhookRow.secret_sealed).where(WebhookRow.id == webhook_id)
    )
    if sealed is None:
        raise WebhookNotFound()
    return sealed


async def disable(session: AsyncSession, webhook_id: str, *, at: datetime) -> None:
    """Disable a webhook unless it is disabled already (a 410 from its endpoint)."""
    await session.execute(
        update(WebhookRow)
        .where(WebhookRow.id == webhook_id, WebhookRow.disabled_at.is_(None))
        .values(disabled_at=at, updated_at=at)
    )


async def delete_row(session: AsyncSession, webhook_id: str) -> None:
    """Delete a webhook; its deliveries go with it (ON DELETE CASCADE)."""
    await session.execute(delete(WebhookRow).where(WebhookRow.id == webhook_id))
