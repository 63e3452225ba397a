"""Organizations."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import OrganizationRow
from parley.ids import looks_like_id
from parley.records import Organization


def to_record(row: OrganizationRow) -> Organization:
    return Organization(id=row.id, name=row.name, created_at=row.created_at)


async def insert(session: AsyncSession, org: Organization) -> None:
    session.add(OrganizationRow(id=org.id, name=org.name, created_at=org.created_at))
    await session.flush()


async def find(session: AsyncSession, id_or_name: str) -> Organization | None:
    """Return the organization with this ID or name, or None."""
    column = OrganizationRow.id if looks_like_id(id_or_name, "org") else OrganizationRow.name
    row = await session.scalar(select(OrganizationRow).where(column == id_or_name))
    return to_record(row) if row else None


async def any_exist(session: AsyncSession) -> bool:
    """Tell whether at least one organization exists."""
    return (await session.scalar(select(OrganizationRow.id).limit(1))) is not None
