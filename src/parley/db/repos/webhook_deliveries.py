"""The outbox of webhook deliveries (STYLE convention 23): rows written in the transaction
of the change they report, claimed by one worker at a time, updated after each attempt.

A claim is a lease: `claimed_by` and `claimed_until`. On PostgreSQL the due rows are
selected `FOR UPDATE SKIP LOCKED`, so concurrent claimers of several instances take
disjoint rows; on SQLite the claim runs in the single writer's transaction. A claimer that
dies leaves its rows leased until `claimed_until`, then any worker claims them again (at
least once).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, and_, bindparam, delete, or_, select, update
from sqlalchemy import insert as insert_into
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import decode_cursor
from parley.db.session import Reader
from parley.db.tables import WebhookDeliveryRow, WebhookRow
from parley.errors import DeliveryNotFound
from parley.ids import looks_like_id
from parley.records import DueDelivery, WebhookDelivery

D = WebhookDeliveryRow


def to_record(row: WebhookDeliveryRow) -> WebhookDelivery:
    return WebhookDelivery(
        id=row.id,
        webhook_id=row.webhook_id,
        event_type=row.event_type,
        status=row.status,
        attempts=row.attempts,
        last_attempt_at=row.last_attempt_at,
        last_status_code=row.last_status_code,
        next_attempt_at=row.next_attempt_at,
        created_at=row.created_at,
    )


_TABLE = cast(Table, D.__table__)
_INSERT = insert_into(_TABLE).values(
    status="pending",
    attempts=0,
    last_attempt_at=None,
    last_status_code=None,
)
"""The outbox row, compiled once (parameters bound at each execution)."""


async def insert(
    session: AsyncSession,
    *,
    msg_id: str,
    webhook_id: str,
    org_id: str,
    event_type: str,
    body: str,
    now: datetime,
    claimed_by: str | None = None,
    claimed_until: datetime | None = None,
) -> None:
    """Add a pending delivery, due now, to the caller's transaction (claimed already by
    `claimed_by` until `claimed_until`, if given). One Core INSERT of the table, the same
    statement each time: it is written on every event of the request path, where the ORM's
    unit of work, and a statement built anew, cost more than the row."""
    await session.execute(
        _INSERT,
        {
            "id": msg_id,
            "webhook_id": webhook_id,
            "org_id": org_id,
            "event_type": event_type,
            "body": body,
            "next_attempt_at": now,
            "claimed_by": claimed_by,
            "claimed_until": claimed_until,
            "created_at": now,
        },
    )


def _due(now: datetime) -> Any:
    return and_(
        D.status == "pending",
        D.next_attempt_at <= now,
        or_(D.claimed_until.is_(None), D.claimed_until < now),
    )


async def any_due(reader: Reader, *, now: datetime) -> bool:
    """Whether some delivery is due and unclaimed (one read, no lock: the worker's poll)."""
    found = await reader.execute(select(D.id).where(_due(now)).limit(1))
    return found.first() is not None


async def claim_due(
    session: AsyncSession,
    *,
    claimer: str,
    now: datetime,
    lease_until: datetime,
    limit: int,
    per_webhook: int,
    in_flight: Mapping[str, int],
) -> list[DueDelivery]:
    """Lease up to `limit` due deliveries of enabled webhooks, oldest due first, so that no
    webhook has more than `per_webhook` counting the claimer's `in_flight` sends."""
    query = (
        select(D, WebhookRow)
        .join(WebhookRow, WebhookRow.id == D.webhook_id)
        .where(_due(now), WebhookRow.disabled_at.is_(None))
        .order_by(D.next_attempt_at, D.id)
        .limit(limit * 4)
        .with_for_update(of=D, skip_locked=True)
    )
    full = sorted(webhook_id for webhook_id, n in in_flight.items() if n >= per_webhook)
    if full:
        query = query.where(D.webhook_id.not_in(full))
    picked: list[DueDelivery] = []
    per = dict(in_flight)
    for row, webhook in await session.execute(query.execution_options(populate_existing=True)):
        if len(picked) == limit:
            break
        if per.get(row.webhook_id, 0) >= per_webhook:
            continue  # left unclaimed: its lock ends with this transaction
        per[row.webhook_id] = per.get(row.webhook_id, 0) + 1
        picked.append(_due_delivery(row, webhook))
    if picked:
        await session.execute(
            update(D)
            .where(D.id.in_([due.id for due in picked]))
            .values(claimed_by=claimer, claimed_until=lease_until)
            .execution_options(synchronize_session=False)
        )
    return picked


def _due_delivery(row: WebhookDeliveryRow, webhook: WebhookRow) -> DueDelivery:
    return DueDelivery(
        id=row.id,
        webhook_id=row.webhook_id,
        org_id=row.org_id,
        url=webhook.url,
        body=row.body,
        attempts=row.attempts,
        secret_sealed=webhook.secret_sealed,
        previous_secret_sealed=webhook.previous_secret_sealed,
        previous_secret_expires_at=webhook.previous_secret_expires_at,
    )


_CLAIMED_COLUMNS = (
    D.id,
    D.webhook_id,
    D.org_id,
    D.body,
    D.attempts,
    WebhookRow.url,
    WebhookRow.secret_sealed,
    WebhookRow.previous_secret_sealed,
    WebhookRow.previous_secret_expires_at,
)


async def claimed_for(
    reader: Reader, *, claimer: str, now: datetime, excluding: Collection[str], limit: int
) -> list[DueDelivery]:
    """Pending deliveries leased to `claimer` (claimed in its name by a commit of another
    process) that it does not hold yet, oldest first; one Core read, no lock."""
    query = (
        select(*_CLAIMED_COLUMNS)
        .join(WebhookRow, WebhookRow.id == D.webhook_id)
        .where(D.status == "pending", D.claimed_by == claimer, D.claimed_until > now)
        .order_by(D.created_at, D.id)
        .limit(limit)
    )
    if excluding:
        query = query.where(D.id.not_in(sorted(excluding)))
    return [
        DueDelivery(
            id=row.id,
            webhook_id=row.webhook_id,
            org_id=row.org_id,
            url=row.url,
            body=row.body,
            attempts=row.attempts,
            secret_sealed=row.secret_sealed,
            previous_secret_sealed=row.previous_secret_sealed,
            previous_secret_expires_at=row.previous_secret_expires_at,
        )
        for row in await reader.execute(query)
    ]


async def release(session: AsyncSession, msg_ids: Sequence[str], *, claimer: str) -> int:
    """Release `claimer`'s claims of these deliveries, for any worker to claim again."""
    result = await session.execute(
        update(D)
        .where(D.id.in_(msg_ids), D.claimed_by == claimer)
        .values(claimed_by=None, claimed_until=None)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0))


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """What one attempt writes to its delivery's row."""

    msg_id: str
    at: datetime
    status_code: int | None
    status: str
    next_attempt_at: datetime | None


_RECORD = (
    update(_TABLE)
    .where(_TABLE.c.id == bindparam("msg_id"))
    .values(
        attempts=_TABLE.c.attempts + 1,
        last_attempt_at=bindparam("at"),
        last_status_code=bindparam("code"),
        status=bindparam("new_status"),
        next_attempt_at=bindparam("next_at"),
        claimed_by=None,
        claimed_until=None,
    )
)
"""One attempt's row, written for many attempts by one executemany: the statement is the
same each time, so SQLAlchemy compiles it once (a statement made per group, e.g. a CASE per
column, was compiled anew at every group and cost more than the rows)."""


async def record_attempts(
    session: AsyncSession, attempts: Sequence[AttemptRow], *, claimer: str
) -> set[str]:
    """Record attempts of deliveries this claimer holds and release their claims; return
    the IDs written (a claim lost, its lease having run out and another worker having taken
    the row, is not written). Two statements for any number of rows."""
    if not attempts:
        return set()
    still_held = await session.scalars(
        select(D.id)
        .where(D.id.in_([a.msg_id for a in attempts]), D.claimed_by == claimer)
        .with_for_update()
    )
    held = set(still_held)
    rows = [
        {
            "msg_id": a.msg_id,
            "at": a.at,
            "code": a.status_code,
            "new_status": a.status,
            "next_at": a.next_attempt_at,
        }
        for a in attempts
        if a.msg_id in held
    ]
    if rows:
        await session.execute(_RECORD, rows)
    return held


async def release_claims(session: AsyncSession, claimer: str) -> int:
    """Release every claim of `claimer` (an instance restarted: its sends died with it)."""
    result = await session.execute(
        update(D)
        .where(D.claimed_by == claimer)
        .values(claimed_by=None, claimed_until=None)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0))


async def find(session: AsyncSession, webhook_id: str, msg_id: str) -> WebhookDelivery:
    if not looks_like_id(msg_id, "msg"):
        raise DeliveryNotFound()
    row = await session.scalar(select(D).where(D.id == msg_id, D.webhook_id == webhook_id))
    if row is None:
        raise DeliveryNotFound()
    return to_record(row)


async def make_due(session: AsyncSession, msg_id: str, *, at: datetime) -> None:
    """Make a delivery pending and due at `at` (a retry asked for by its owner)."""
    await session.execute(
        update(D)
        .where(D.id == msg_id)
        .values(status="pending", next_attempt_at=at)
        .execution_options(synchronize_session=False)
    )


async def list_page(
    session: AsyncSession, webhook_id: str, *, cursor: str | None, limit: int
) -> list[WebhookDelivery]:
    """The webhook's deliveries, newest first, after `cursor`; one extra row for the next
    page's cursor."""
    query = select(D).where(D.webhook_id == webhook_id)
    if cursor is not None:
        before_created, before_id = decode_cursor(cursor)
        query = query.where(
            or_(
                D.created_at < before_created,
                and_(D.created_at == before_created, D.id < before_id),
            )
        )
    query = query.order_by(D.created_at.desc(), D.id.desc()).limit(limit + 1)
    return [to_record(row) for row in await session.scalars(query)]


async def prune_delivered(session: AsyncSession, *, before: datetime) -> int:
    """Delete delivered rows created before `before`; return how many."""
    result = await session.execute(
        delete(D)
        .where(D.status == "delivered", D.created_at < before)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0))
