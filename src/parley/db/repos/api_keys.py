"""API keys: stored as the SHA-256 of the secret, looked up by that hash."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.session import StatementConnection
from parley.db.tables import ApiKeyGraceSecretRow, ApiKeyRow
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


# --- renaming and rotation (API.md section 17) ------------------------------------------

_GRACE = ApiKeyGraceSecretRow.__table__


@dataclass(frozen=True, slots=True)
class GraceSecret:
    """A secret a rotation replaced: its key, and until when it still works."""

    key_id: str
    org_id: str
    valid_until: datetime


async def get_active_for_update(session: AsyncSession, key_id: str) -> ApiKey | None:
    """Return the unrevoked key with this ID, its row locked (PostgreSQL) for a change."""
    row = await session.scalar(
        select(ApiKeyRow)
        .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
        .with_for_update()
    )
    return to_record(row) if row else None


async def rename(session: AsyncSession, key_id: str, *, name: str) -> None:
    await session.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(name=name))


async def replace_secret(
    session: AsyncSession, key_id: str, *, secret_hash: str, last4: str
) -> str:
    """Give the key a new secret; return the hash of the secret it replaces."""
    old: str = (
        await session.execute(select(ApiKeyRow.secret_hash).where(ApiKeyRow.id == key_id))
    ).scalar_one()
    await session.execute(
        update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(secret_hash=secret_hash, last4=last4)
    )
    return old


async def add_grace(
    session: AsyncSession,
    key_id: str,
    *,
    secret_hash: str,
    last4: str,
    valid_until: datetime,
    at: datetime,
) -> None:
    session.add(
        ApiKeyGraceSecretRow(
            secret_hash=secret_hash,
            key_id=key_id,
            last4=last4,
            valid_until=valid_until,
            created_at=at,
        )
    )
    await session.flush()


async def drop_grace(session: AsyncSession, key_id: str) -> list[str]:
    """Delete the key's replaced secrets; return their hashes."""
    hashes = list(
        await session.scalars(
            select(ApiKeyGraceSecretRow.secret_hash).where(ApiKeyGraceSecretRow.key_id == key_id)
        )
    )
    if hashes:
        await session.execute(
            delete(ApiKeyGraceSecretRow).where(ApiKeyGraceSecretRow.key_id == key_id)
        )
    return hashes


async def find_grace_by_hash(
    connection: StatementConnection, secret_hash: str, *, now: datetime
) -> GraceSecret | None:
    """Return the replaced secret that hashes to `secret_hash` if its grace has not ended
    and its key is not revoked (one Core statement: `Database.statement()`)."""
    row = (await connection.execute(_GRACE_BY_HASH, {"secret_hash": secret_hash})).first()
    if row is None or row.valid_until <= now:
        return None
    return GraceSecret(key_id=row.id, org_id=row.org_id, valid_until=row.valid_until)


_GRACE_BY_HASH = (
    select(_KEYS.c.id, _KEYS.c.org_id, _GRACE.c.valid_until)
    .join_from(_GRACE, _KEYS, _GRACE.c.key_id == _KEYS.c.id)
    .where(_GRACE.c.secret_hash == bindparam("secret_hash"), _KEYS.c.revoked_at.is_(None))
)


async def sweep_grace(session: AsyncSession, *, now: datetime) -> int:
    """Delete the replaced secrets whose grace has ended; return how many."""
    result = await session.execute(
        delete(ApiKeyGraceSecretRow).where(ApiKeyGraceSecretRow.valid_until <= now)
    )
    return int(getattr(result, "rowcount", 0) or 0)
