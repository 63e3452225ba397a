"""Recordings waiting to be stored: the WAV kept in the database until its store has it.

A claim moves a due row's `next_attempt_at` to the claim's end in the claiming transaction
(`FOR UPDATE SKIP LOCKED` on PostgreSQL, so two instances take different rows; SQLite has
one writer): a claimer that dies leaves the row to be claimed again when that time passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.session import StatementConnection
from parley.db.tables import RecordingUploadRow

U = RecordingUploadRow


@dataclass(frozen=True)
class Upload:
    """A recording to store: where, by which policy (None: the directory), what."""

    org_id: str
    conversation_id: str
    object_key: str
    policy_id: str | None
    data: bytes
    attempts: int


async def add(session: AsyncSession, upload: Upload, *, now: datetime, first_try: datetime) -> None:
    """Keep `upload` until it is stored; the timer leaves it alone until `first_try`."""
    session.add(
        RecordingUploadRow(
            org_id=upload.org_id,
            conversation_id=upload.conversation_id,
            object_key=upload.object_key,
            policy_id=upload.policy_id,
            data=upload.data,
            attempts=upload.attempts,
            next_attempt_at=first_try,
            created_at=now,
        )
    )
    await session.flush()


async def claim_due(session: AsyncSession, *, now: datetime, until: datetime) -> Upload | None:
    """The oldest upload due at `now`, claimed until `until`; None when none is due."""
    row = (
        await session.execute(
            select(U)
            .where(U.next_attempt_at <= now)
            .order_by(U.next_attempt_at)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
    ).scalar_one_or_none()
    if row is None:
        return None
    row.next_attempt_at = until
    await session.flush()
    return Upload(
        org_id=row.org_id,
        conversation_id=row.conversation_id,
        object_key=row.object_key,
        policy_id=row.policy_id,
        data=row.data,
        attempts=row.attempts,
    )


async def failed(
    session: AsyncSession, upload: Upload, *, attempts: int, retry_at: datetime, error: str
) -> None:
    """Record a failed try; the next is due at `retry_at`."""
    await session.execute(
        update(U)
        .where(U.org_id == upload.org_id, U.conversation_id == upload.conversation_id)
        .values(attempts=attempts, next_attempt_at=retry_at, last_error=error[:500])
        .execution_options(synchronize_session=False)
    )


async def remove(session: AsyncSession, org_id: str, conversation_id: str) -> None:
    """The recording is stored (or can never be): forget the upload."""
    await session.execute(
        delete(U)
        .where(U.org_id == org_id, U.conversation_id == conversation_id)
        .execution_options(synchronize_session=False)
    )


async def waiting(connection: StatementConnection, org_id: str, conversation_id: str) -> bool:
    """Whether the conversation's recording is still waiting to be stored."""
    result = await connection.execute(
        select(exists().where(U.org_id == org_id, U.conversation_id == conversation_id))
    )
    return bool(result.scalar())
