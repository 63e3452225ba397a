"""Session tokens: stored as the SHA-256 of the secret, looked up by that hash."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.session import StatementConnection
from parley.db.tables import SessionTokenRow
from parley.records import SessionToken

_TOKENS = SessionTokenRow.__table__


def to_record(row: SessionTokenRow | Row[Any]) -> SessionToken:
    ids = frozenset(row.conversation_ids) if row.conversation_ids is not None else None
    return SessionToken(
        id=row.id,
        org_id=row.org_id,
        conversation_ids=ids,
        expires_at=row.expires_at,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


async def insert(session: AsyncSession, token: SessionToken, *, secret_hash: str) -> None:
    session.add(
        SessionTokenRow(
            id=token.id,
            org_id=token.org_id,
            secret_hash=secret_hash,
            conversation_ids=sorted(token.conversation_ids) if token.conversation_ids else None,
            expires_at=token.expires_at,
            created_at=token.created_at,
            revoked_at=None,
        )
    )
    await session.flush()


async def find_by_hash(connection: StatementConnection, secret_hash: str) -> SessionToken | None:
    """Return the token whose secret hashes to `secret_hash`, revoked or not (one Core
    statement: `Database.statement()`)."""
    row = (await connection.execute(_BY_HASH, {"secret_hash": secret_hash})).first()
    return to_record(row) if row else None


# Built once, like every statement of a request's hot path (docs/performance.md).
_BY_HASH = select(_TOKENS).where(_TOKENS.c.secret_hash == bindparam("secret_hash"))


async def get(session: AsyncSession, token_id: str) -> SessionToken | None:
    row = await session.get(SessionTokenRow, token_id)
    return to_record(row) if row else None


async def revoke(session: AsyncSession, token: SessionToken, *, at: datetime) -> None:
    """Mark the token revoked at `at`, unless it already is (idempotent)."""
    if token.revoked_at is None:
        await session.execute(
            update(SessionTokenRow).where(SessionTokenRow.id == token.id).values(revoked_at=at)
        )


async def list_active(
    session: AsyncSession, org_id: str, *, now: datetime, limit: int = 100
) -> list[SessionToken]:
    """Return up to `limit` unrevoked, unexpired tokens of the organization, newest first."""
    rows = await session.scalars(
        select(SessionTokenRow)
        .where(
            SessionTokenRow.org_id == org_id,
            SessionTokenRow.revoked_at.is_(None),
            SessionTokenRow.expires_at > now,
        )
        .order_by(SessionTokenRow.created_at.desc(), SessionTokenRow.id)
        .limit(limit)
    )
    return [to_record(row) for row in rows]
