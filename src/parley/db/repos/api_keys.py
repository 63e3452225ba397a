"""API keys: stored as the SHA-256 of the secret, looked up by that hash."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.session import StatementConnection
from parley.db.tables import ApiKeyRow
from parley.records import ApiKey


@dataclass(frozen=True, slots=True)
class ApiKeyState:
    """A key found by its secret, revoked or not: what a sign-in reads."""

    id: str
    org_id: str
    revoked_at: datetime | None


_KEYS = ApiKeyRow.__table__


def to_record(row: ApiKeyRow | Row[Any]) -> ApiKey:
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


async def find_active_by_hash(connection: StatementConnection, secret_hash: str) -> ApiKey | None:
    """Return the unrevoked key whose secret hashes to `secret_hash` (one Core statement:
    `Database.statement()`)."""
    row = (await connection.execute(_ACTIVE_BY_HASH, {"secret_hash": secret_hash})).first()
    return to_record(row) if row else None


# Built once, like every statement of a request's hot path (docs/performance.md).
_ACTIVE_BY_HASH = select(_KEYS).where(
    _KEYS.c.secret_hash == bindparam("secret_hash"), _KEYS.c.revoked_at.is_(None)
)


async def get_active(session: AsyncSession, key_id: str) -> ApiKey | None:
    """Return the key with this ID unless it is revoked."""
    row = await session.scalar(
        select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
    )
    return to_record(row) if row else None


async def list_page(
    session: AsyncSession, org_id: str, *, cursor: str | None, limit: int
) -> list[ApiKey]:
    query = select(ApiKeyRow).where(ApiKeyRow.org_id == org_id, ApiKeyRow.revoked_at.is_(None))
    query = paginate(
        query, created_at=ApiKeyRow.created_at, row_id=ApiKeyRow.id, cursor=cursor, limit=limit
    )
    return [to_record(row) for row in await session.scalars(query)]


async def revoke(session: AsyncSession, key_id: str, *, at: datetime) -> None:
    await session.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(revoked_at=at))


async def find_any_by_hash(session: AsyncSession, secret_hash: str) -> ApiKeyState | None:
    """Return the key whose secret hashes to `secret_hash`, revoked or not."""
    query = select(ApiKeyRow.id, ApiKeyRow.org_id, ApiKeyRow.revoked_at).where(
        ApiKeyRow.secret_hash == secret_hash
    )
    found = (await session.execute(query)).first()
    return ApiKeyState(*found) if found else None
