"""API keys: stored as the SHA-256 of the secret, looked up by that hash."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ApiKeyRow
from parley.records import ApiKey


def to_record(row: ApiKeyRow) -> ApiKey:
    return ApiKey(
        id=row.id,
        org_id=row.org_id,
        name=row.name,
        prefix=row.prefix,
        last4=row.last4,
        created_at=row.created_at,
    )


async def insert(session: AsyncSession, key: ApiKey, *, secret_hash: str) -> None:
    session.add(
        ApiKeyRow(
            id=key.id,
            org_id=key.org_id,
            name=key.name,
            secret_hash=secret_hash,
            prefix=key.prefix,
            last4=key.last4,
            created_at=key.created_at,
        )
    )
    await session.flush()


async def find_active_by_hash(session: AsyncSession, secret_hash: str) -> ApiKey | None:
    """Return the unrevoked key whose secret hashes to `secret_hash`."""
    row = await session.scalar(
        select(ApiKeyRow).where(
            ApiKeyRow.secret_hash == secret_hash, ApiKeyRow.revoked_at.is_(None)
        )
    )
    return to_record(row) if row else None


async def get_active(session: AsyncSession, key_id: str) -> ApiKeyRow | None:
    return await session.scalar(
        select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
    )


async def list_page(
    session: AsyncSession, org_id: str, *, cursor: str | None, limit: int
) -> list[ApiKey]:
    query = select(ApiKeyRow).where(ApiKeyRow.org_id == org_id, ApiKeyRow.revoked_at.is_(None))
    query = paginate(
        query, created_at=ApiKeyRow.created_at, row_id=ApiKeyRow.id, cursor=cursor, limit=limit
    )
    return [to_record(row) for row in await session.scalars(query)]


async def revoke(session: AsyncSession, row: ApiKeyRow, *, at: datetime) -> None:
    row.revoked_at = at
    await session.flush()


async def find_any_by_hash(session: AsyncSession, secret_hash: str) -> ApiKeyRow | None:
    """Return the key whose secret hashes to `secret_hash`, revoked or not."""
    return await session.scalar(select(ApiKeyRow).where(ApiKeyRow.secret_hash == secret_hash))
