"""Revocations committed in the database, waiting to be published to the shared store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import PendingRevocationRow


@dataclass(frozen=True, slots=True)
class PendingRevocation:
    id: int
    credential_id: str
    expires_at: float


async def add(
    session: AsyncSession, credential_id: str, *, expires_at: float, at: datetime
) -> PendingRevocation:
    """Queue a revocation, in the transaction of the change it announces."""
    row = PendingRevocationRow(credential_id=credential_id, expires_at=expires_at, created_at=at)
    session.add(row)
    await session.flush()
    return PendingRevocation(row.id, credential_id, expires_at)


async def oldest(session: AsyncSession, *, limit: int) -> list[PendingRevocation]:
    """Return up to `limit` queued revocations, oldest first."""
    query = select(PendingRevocationRow).order_by(PendingRevocationRow.id).limit(limit)
    return [
        PendingRevocation(row.id, row.credential_id, row.expires_at)
        for row in await session.scalars(query)
    ]


async def remove(session: AsyncSession, ids: Sequence[int]) -> None:
    """Drop the published revocations."""
    if ids:
        await session.execute(delete(PendingRevocationRow).where(PendingRevocationRow.id.in_(ids)))
