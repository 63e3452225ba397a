"""Carrier accounts and media stream tokens (API.md section 13).

The auth token is stored sealed: this module never sees it in clear (the service seals it
before `put_account` and unseals what `sealed_token_of` returns). Stream tokens are stored as
their SHA-256 only.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import ConversationRow, PhoneNumberRow, StreamTokenRow, TwilioAccountRow
from parley.errors import AccountTaken
from parley.records import TwilioAccount

UNIQUE_VIOLATIONS = {
    "uq_twilio_accounts_account_sid": AccountTaken,
    "twilio_accounts.account_sid": AccountTaken,
}


def to_record(row: TwilioAccountRow) -> TwilioAccount:
    return TwilioAccount(
        org_id=row.org_id,
        account_sid=row.account_sid,
        auth_token_last4=row.auth_token_last4,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def get_account(session: AsyncSession, org_id: str) -> TwilioAccount | None:
    row = await session.get(TwilioAccountRow, org_id, populate_existing=True)
    return to_record(row) if row else None


async def sid_owner(session: AsyncSession, account_sid: str) -> str | None:
    """Return the organization that set `account_sid`, or None."""
    owner: str | None = await session.scalar(
        select(TwilioAccountRow.org_id).where(TwilioAccountRow.account_sid == account_sid)
    )
    return owner


async def sealed_token_of(session: AsyncSession, account_sid: str) -> tuple[str, str] | None:
    """Return (org ID, sealed auth token) of the account `account_sid`, or None."""
    found = (
        await session.execute(
            select(TwilioAccountRow.org_id, TwilioAccountRow.auth_token_sealed).where(
                TwilioAccountRow.account_sid == account_sid
            )
        )
    ).first()
    return (found[0], found[1]) if found else None


async def put_account(
    session: AsyncSession,
    *,
    org_id: str,
    account_sid: str,
    sealed_token: str,
    last4: str,
    at: datetime,
) -> TwilioAccount:
    """Set the organization's account, replacing the one it had (its creation time kept)."""
    row = await session.get(TwilioAccountRow, org_id, with_for_update=True)
    if row is None:
        row = TwilioAccountRow(org_id=org_id, created_at=at)
        session.add(row)
    row.account_sid = account_sid
    row.auth_token_sealed = sealed_token
    row.auth_token_last4 = last4
    row.updated_at = at
    await session.flush()
    return to_record(row)


async def delete_account(session: AsyncSession, org_id: str) -> bool:
    """Delete the organization's account; False if it had none."""
    result = await session.execute(
        delete(TwilioAccountRow)
        .where(TwilioAccountRow.org_id == org_id)
        .returning(TwilioAccountRow.org_id)
    )
    return result.first() is not None


async def insert_stream_token(
    session: AsyncSession,
    *,
    token_hash: str,
    org_id: str,
    conversation_id: str,
    expires_at: datetime,
) -> None:
    session.add(
        StreamTokenRow(
            token_hash=token_hash,
            org_id=org_id,
            conversation_id=conversation_id,
            expires_at=expires_at,
            used_at=None,
        )
    )
    await session.flush()


async def use_stream_token(
    session: AsyncSession, *, token_hash: str, conversation_id: str, at: datetime
) -> str | None:
    """Mark the token used and return its organization, in one statement, or return None.

    Only an unused, unexpired token for `conversation_id` matches: of two instances that
    redeem it at once, one UPDATE finds it and the other finds nothing. A token that does
    not match changes nothing, so a wrong guess never uses up the right token.
    """
    result = await session.execute(
        update(StreamTokenRow)
        .where(
            StreamTokenRow.token_hash == token_hash,
            StreamTokenRow.conversation_id == conversation_id,
            StreamTokenRow.used_at.is_(None),
            StreamTokenRow.expires_at > at,
        )
        .values(used_at=at)
        .returning(StreamTokenRow.org_id)
        .execution_options(synchronize_session=False)
    )
    org_id: str | None = result.scalar()
    return org_id


async def end_unanswered_calls(session: AsyncSession, *, at: datetime) -> list[tuple[str, str]]:
    """End `pending` conversations whose stream token expired unused; return (org, ID) pairs."""
    expired = exists().where(
        StreamTokenRow.org_id == ConversationRow.org_id,
        StreamTokenRow.conversation_id == ConversationRow.id,
        StreamTokenRow.used_at.is_(None),
        StreamTokenRow.expires_at <= at,
    )
    result = await session.execute(
        update(ConversationRow)
        .where(ConversationRow.status == "pending", expired)
        .values(status="ended", ended_at=at, ended_by="timeout")
        .returning(ConversationRow.org_id, ConversationRow.id)
        .execution_options(synchronize_session=False)
    )
    return [(org_id, conversation_id) for org_id, conversation_id in result]


async def agent_of_number(session: AsyncSession, number: str) -> str | None:
    """Return the ID of the agent that `number` belongs to, or None."""
    agent_id: str | None = await session.scalar(
        select(PhoneNumberRow.agent_id).where(PhoneNumberRow.number == number)
    )
    return agent_id
