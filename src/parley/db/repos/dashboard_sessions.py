"""Dashboard sessions: stored as the SHA-256 of the random ID in the browser's cookie."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import ApiKeyRow, DashboardSessionRow
from parley.records import DashboardSession


@dataclass(frozen=True, slots=True)
class LiveSession:
    """A live session found by its ID's hash; changes go through this module, by that hash."""

    id_hash: str
    last_seen_at: datetime
    record: DashboardSession


def to_record(row: DashboardSessionRow) -> DashboardSession:
    return DashboardSession(
        org_id=row.org_id,
        api_key_id=row.api_key_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


async def insert(
    session: AsyncSession,
    *,
    id_hash: str,
    org_id: str,
    api_key_id: str,
    now: datetime,
    expires_at: datetime,
) -> DashboardSession:
    row = DashboardSessionRow(
        id_hash=id_hash,
        org_id=org_id,
        api_key_id=api_key_id,
        created_at=now,
        last_seen_at=now,
        expires_at=expires_at,
        ended_at=None,
    )
    session.add(row)
    await session.flush()
    return to_record(row)


async def find_live(
    session: AsyncSession, id_hash: str, *, now: datetime, idle_since: datetime
) -> LiveSession | None:
    """Return the session if it has not ended, expired or idled out, and its key is active."""
    row = await session.scalar(
        select(DashboardSessionRow)
        .join(ApiKeyRow, ApiKeyRow.id == DashboardSessionRow.api_key_id)
        .where(
            DashboardSessionRow.id_hash == id_hash,
            DashboardSessionRow.ended_at.is_(None),
            DashboardSessionRow.expires_at > now,
            DashboardSessionRow.last_seen_at > idle_since,
            ApiKeyRow.revoked_at.is_(None),
        )
    )
    return LiveSession(row.id_hash, row.last_seen_at, to_record(row)) if row else None


async def end_for_key(session: AsyncSession, api_key_id: str, *, at: datetime) -> None:
    """End every open session opened with the key."""
    await session.execute(
        update(DashboardSessionRow)
        .where(DashboardSessionRow.api_key_id == api_key_id, DashboardSessionRow.ended_at.is_(None))
        .values(ended_at=at)
    )


async def end(session: AsyncSession, id_hash: str, *, at: datetime) -> None:
    await _set(session, id_hash, ended_at=at)


async def touch(session: AsyncSession, id_hash: str, *, at: datetime) -> None:
    """Record that the session was used at `at` (its idle time starts again)."""
    await _set(session, id_hash, last_seen_at=at)


async def _set(session: AsyncSession, id_hash: str, **values: object) -> None:
    await session.execute(
        update(DashboardSessionRow).where(DashboardSessionRow.id_hash == id_hash).values(**values)
    )
