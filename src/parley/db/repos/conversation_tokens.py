"""Conversation tokens: stored as the SHA-256 of the secret, used up by one statement."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import ConversationTokenRow
from parley.records import ConversationToken

SWEEP_BATCH = 1000


async def insert(
    session: AsyncSession, token: ConversationToken, *, secret_hash: str, at: datetime
) -> None:
    session.add(
        ConversationTokenRow(
            secret_hash=secret_hash,
            org_id=token.org_id,
            agent_id=token.agent_id,
            expires_at=token.expires_at,
            used_at=None,
            created_at=at,
        )
    )
    await session.flush()


async def use(session: AsyncSession, secret_hash: str, *, at: datetime) -> ConversationToken | None:
    """Mark the token used and return it, in one statement, or return None.

    Only an unused, unexpired token matches: of two handshakes that present it at once, on
    any instance, one UPDATE finds it and the other finds nothing (PostgreSQL's row lock;
    SQLite's one writer)."""
    found = (
        await session.execute(
            update(ConversationTokenRow)
            .where(
                ConversationTokenRow.secret_hash == secret_hash,
                ConversationTokenRow.used_at.is_(None),
                ConversationTokenRow.expires_at > at,
            )
            .values(used_at=at)
            .returning(
                ConversationTokenRow.org_id,
                ConversationTokenRow.agent_id,
                ConversationTokenRow.expires_at,
            )
            .execution_options(synchronize_session=False)
        )
    ).first()
    return ConversationToken(*found) if found else None


async def sweep(session: AsyncSession, *, before: datetime) -> int:
    """Delete a batch of tokens that expired before `before`; return how many."""
    expired = (
        select(ConversationTokenRow.secret_hash)
        .where(ConversationTokenRow.expires_at < before)
        .limit(SWEEP_BATCH)
        .scalar_subquery()
    )
    result = await session.execute(
        delete(ConversationTokenRow).where(ConversationTokenRow.secret_hash.in_(expired))
    )
    return int(getattr(result, "rowcount", 0) or 0)
