"""Organizations, and their settings as the SDK's workspace (API.md section 17)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.session import StatementConnection
from parley.db.tables import OrganizationRow
from parley.errors import OrganizationNotFound
from parley.ids import looks_like_id
from parley.records import Organization, Workspace


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


async def workspace(session: AsyncSession, org_id: str, *, for_update: bool = False) -> Workspace:
    """Return the organization's workspace settings (`for_update`: its row locked)."""
    query = select(OrganizationRow).where(OrganizationRow.id == org_id)
    row = await session.scalar(query.with_for_update() if for_update else query)
    if row is None:
        raise OrganizationNotFound()
    return Workspace(
        id=row.id,
        name=row.name,
        max_active_conversations=row.max_active_conversations,
        ip_allowlist=tuple(row.ip_allowlist or ()),
        invite_link_allowed_domains=tuple(row.invite_link_allowed_domains or ()),
        logo_url=row.logo_url,
    )


async def change(session: AsyncSession, org_id: str, values: Mapping[str, Any]) -> None:
    """Set the given columns of the organization's row."""
    if values:
        await session.execute(
            update(OrganizationRow).where(OrganizationRow.id == org_id).values(**values)
        )


_ALLOWLIST = select(OrganizationRow.ip_allowlist).where(OrganizationRow.id == bindparam("org_id"))


async def ip_allowlist_of(connection: StatementConnection, org_id: str) -> tuple[str, ...]:
    """Return the organization's IP allowlist (empty: any address); one statement, built
    once, for a point read."""
    found = (await connection.execute(_ALLOWLIST, {"org_id": org_id})).scalar()
    return tuple(found or ())
