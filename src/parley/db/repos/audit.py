"""The audit trail: events in per-organization hash chains, and each chain's head."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, union
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import AuditEventRow, AuditHeadRow, OrganizationRow
from parley.records import AuditEvent

GENESIS_HASH = "0" * 64
"""The `prev_hash` of an organization's first event."""


def to_record(row: AuditEventRow) -> AuditEvent:
    return AuditEvent(
        org_id=row.org_id,
        seq=row.seq,
        action=row.action,
        target=row.target,
        actor_kind=row.actor_kind,
        actor_id=row.actor_id,
        client=row.client,
        request_id=row.request_id,
        details=dict(row.details or {}),
        created_at=row.created_at,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


async def lock_chain(session: AsyncSession, org_id: str) -> tuple[int, str]:
    """Lock the organization's chain for this transaction; return its head (seq, hash).

    PostgreSQL: `SELECT … FOR NO KEY UPDATE` on the organization's row, so two events of one
    organization queue instead of forking the chain; the weaker lock does not conflict with
    the `KEY SHARE` locks that foreign keys to the organization take, so it cannot deadlock
    with them. SQLite: transactions already begin `IMMEDIATE` (one writer at a time).
    """
    await session.execute(
        select(OrganizationRow.id)
        .where(OrganizationRow.id == org_id)
        .with_for_update(key_share=True)
    )
    head = await head_of(session, org_id)
    return head if head is not None else (0, GENESIS_HASH)


async def head_of(session: AsyncSession, org_id: str) -> tuple[int, str] | None:
    """Return the recorded head (seq, hash) of the organization's chain, if any."""
    row = (
        await session.execute(
            select(AuditHeadRow.seq, AuditHeadRow.hash).where(AuditHeadRow.org_id == org_id)
        )
    ).first()
    return (row[0], row[1]) if row is not None else None


async def append(session: AsyncSession, event: AuditEvent) -> None:
    """Insert an event and move the chain's head to it (the chain must be locked)."""
    session.add(
        AuditEventRow(
            org_id=event.org_id,
            seq=event.seq,
            action=event.action,
            target=event.target,
            actor_kind=event.actor_kind,
            actor_id=event.actor_id,
            client=event.client,
            request_id=event.request_id,
            details=dict(event.details),
            created_at=event.created_at,
            prev_hash=event.prev_hash,
            hash=event.hash,
        )
    )
    head = await session.get(AuditHeadRow, event.org_id, populate_existing=True)
    if head is None:
        session.add(AuditHeadRow(org_id=event.org_id, seq=event.seq, hash=event.hash))
    else:
        head.seq, head.hash = event.seq, event.hash
    await session.flush()


async def list_page(
    session: AsyncSession,
    org_id: str,
    *,
    action: str | None,
    target: str | None,
    before_seq: int | None,
    limit: int,
) -> list[AuditEvent]:
    """Return up to `limit` + 1 events, newest first, older than `before_seq` if given."""
    query = select(AuditEventRow).where(AuditEventRow.org_id == org_id)
    if action is not None:
        query = query.where(AuditEventRow.action == action)
    if target is not None:
        query = query.where(AuditEventRow.target == target)
    if before_seq is not None:
        query = query.where(AuditEventRow.seq < before_seq)
    query = query.order_by(AuditEventRow.seq.desc()).limit(limit + 1)
    return [to_record(row) for row in await session.scalars(query)]


async def chain_slice(
    session: AsyncSession, org_id: str, *, after_seq: int, limit: int
) -> Sequence[AuditEvent]:
    """Return the events after `after_seq` in chain order (by seq), at most `limit`."""
    query = (
        select(AuditEventRow)
        .where(AuditEventRow.org_id == org_id, AuditEventRow.seq > after_seq)
        .order_by(AuditEventRow.seq)
        .limit(limit)
    )
    return [to_record(row) for row in await session.scalars(query)]


async def chained_orgs(session: AsyncSession) -> list[str]:
    """Return every organization that has events or a recorded head, sorted."""
    query = union(select(AuditEventRow.org_id), select(AuditHeadRow.org_id))
    return sorted(str(org_id) for org_id in (await session.scalars(query)))
