"""Carrier accounts, answered calls and media stream tokens (API.md section 13).

The auth token is stored sealed: this module never sees it in clear (the service seals it
before `put_account` and unseals what `sealed_token_of` returns). Stream tokens are found by
their SHA-256; each is also kept sealed (by the service) until it is used, so that a repeat of
its call's webhook gets it again (`answered_call`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, delete, exists, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import (
    BriefingRow,
    ConversationRow,
    PhoneNumberRow,
    StreamTokenRow,
    TwilioAccountRow,
    TwilioCallRow,
)
from parley.errors import AccountTaken
from parley.records import Status, TwilioAccount

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


@dataclass(frozen=True, slots=True)
class AnsweredCall:
    """How the webhook answered a call before: `conversation_id` None for a rejection;
    `token_sealed` None unless the conversation is `pending` and its token unused and
    unexpired (then a repeat may get the same answer)."""

    conversation_id: str | None
    token_sealed: str | None


async def claim_call(
    session: AsyncSession, *, org_id: str, call_sid: str, conversation_id: str, at: datetime
) -> bool:
    """Record that this request answers `call_sid` with `conversation_id`; False if another
    request for that call did first (it then answers as `answered_call` says).

    One INSERT that does nothing on conflict with the primary key: on PostgreSQL a second
    transaction waits for the first's commit and then finds the call taken (on SQLite the
    write transactions run one at a time), so of concurrent requests, on any instance, one
    wins.
    """
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = (
        dialect.insert(TwilioCallRow)
        .values(org_id=org_id, call_sid=call_sid, conversation_id=conversation_id, answered_at=at)
        .on_conflict_do_nothing(index_elements=[TwilioCallRow.org_id, TwilioCallRow.call_sid])
        .returning(TwilioCallRow.call_sid)
    )
    return (await session.execute(statement)).first() is not None


async def reject_claimed_call(session: AsyncSession, *, org_id: str, call_sid: str) -> None:
    """Record that the call claimed by this transaction was rejected (no conversation)."""
    await session.execute(
        update(TwilioCallRow)
        .where(TwilioCallRow.org_id == org_id, TwilioCallRow.call_sid == call_sid)
        .values(conversation_id=None)
        .execution_options(synchronize_session=False)
    )


async def answered_call(
    session: AsyncSession, *, org_id: str, call_sid: str, at: datetime
) -> AnsweredCall | None:
    """Return how `call_sid` was answered, as of `at`; None if it never was."""
    token = and_(
        StreamTokenRow.org_id == TwilioCallRow.org_id,
        StreamTokenRow.conversation_id == TwilioCallRow.conversation_id,
        StreamTokenRow.used_at.is_(None),
        StreamTokenRow.expires_at > at,
    )
    pending = and_(
        ConversationRow.org_id == TwilioCallRow.org_id,
        ConversationRow.id == TwilioCallRow.conversation_id,
        ConversationRow.status == Status.PENDING,
    )
    found = (
        await session.execute(
            select(TwilioCallRow.conversation_id, StreamTokenRow.token_sealed)
            .select_from(TwilioCallRow)
            .outerjoin(ConversationRow, pending)
            .outerjoin(StreamTokenRow, and_(token, ConversationRow.id.is_not(None)))
            .where(TwilioCallRow.org_id == org_id, TwilioCallRow.call_sid == call_sid)
        )
    ).first()
    return AnsweredCall(conversation_id=found[0], token_sealed=found[1]) if found else None


async def insert_stream_token(
    session: AsyncSession,
    *,
    token_hash: str,
    token_sealed: str,
    org_id: str,
    conversation_id: str,
    expires_at: datetime,
) -> None:
    session.add(
        StreamTokenRow(
            token_hash=token_hash,
            token_sealed=token_sealed,
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
    """Mark the token used (its sealed copy erased) and return its organization, in one
    statement, or return None.

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
        .values(used_at=at, token_sealed=None)
        .returning(StreamTokenRow.org_id)
        .execution_options(synchronize_session=False)
    )
    org_id: str | None = result.scalar()
    return org_id


async def unanswered_calls(session: AsyncSession, *, at: datetime) -> list[tuple[str, str]]:
    """The (org, ID) pairs of `pending` conversations whose stream token expired unused."""
    expired = exists().where(
        StreamTokenRow.org_id == ConversationRow.org_id,
        StreamTokenRow.conversation_id == ConversationRow.id,
        StreamTokenRow.used_at.is_(None),
        StreamTokenRow.expires_at <= at,
    )
    result = await session.execute(
        select(ConversationRow.org_id, ConversationRow.id).where(
            ConversationRow.status == Status.PENDING, expired
        )
    )
    return [(org_id, conversation_id) for org_id, conversation_id in result]


async def conversation_of_call(session: AsyncSession, *, org_id: str, call_sid: str) -> str | None:
    """The conversation answering (or placed as) the call `call_sid`, or None."""
    conversation_id: str | None = await session.scalar(
        select(TwilioCallRow.conversation_id).where(
            TwilioCallRow.org_id == org_id, TwilioCallRow.call_sid == call_sid
        )
    )
    return conversation_id


@dataclass(frozen=True, slots=True)
class StreamTokens:
    """A conversation's stream tokens as of a moment: whether it has any, and the sealed
    copy of the one still unused and unexpired (a repeat of its webhook gets it again)."""

    any: bool
    unused_sealed: str | None


async def stream_tokens_of(
    session: AsyncSession, *, org_id: str, conversation_id: str, at: datetime
) -> StreamTokens:
    rows = (
        await session.execute(
            select(
                StreamTokenRow.used_at, StreamTokenRow.expires_at, StreamTokenRow.token_sealed
            ).where(
                StreamTokenRow.org_id == org_id, StreamTokenRow.conversation_id == conversation_id
            )
        )
    ).all()
    unused = next(
        (
            sealed
            for used_at, expires_at, sealed in rows
            if used_at is None and expires_at > at and sealed is not None
        ),
        None,
    )
    return StreamTokens(any=bool(rows), unused_sealed=unused)


async def unconnected_placed_calls(
    session: AsyncSession, *, placed_before: datetime
) -> list[tuple[str, str]]:
    """The (org, ID) pairs of outbound calls placed before `placed_before` that are still
    `pending` and whose carrier never fetched their TwiML (no stream token was made)."""
    token = exists().where(
        StreamTokenRow.org_id == ConversationRow.org_id,
        StreamTokenRow.conversation_id == ConversationRow.id,
    )
    result = await session.execute(
        select(ConversationRow.org_id, ConversationRow.id).where(
            ConversationRow.status == Status.PENDING,
            ConversationRow.call_direction == "outbound",
            ConversationRow.created_at < placed_before,
            ~token,
        )
    )
    return [(org_id, conversation_id) for org_id, conversation_id in result]


async def agent_of_number(session: AsyncSession, number: str) -> str | None:
    """Return the ID of the agent that `number` belongs to, or None."""
    agent_id: str | None = await session.scalar(
        select(PhoneNumberRow.agent_id).where(PhoneNumberRow.number == number)
    )
    return agent_id


async def insert_briefing(
    session: AsyncSession,
    *,
    token_hash: str,
    org_id: str,
    conversation_id: str,
    text: str,
    voice_id: str,
    expires_at: datetime,
) -> None:
    """Store what a warm transfer's target will hear, under its token's SHA-256."""
    session.add(
        BriefingRow(
            token_hash=token_hash,
            org_id=org_id,
            conversation_id=conversation_id,
            text=text,
            voice_id=voice_id,
            expires_at=expires_at,
            used_at=None,
        )
    )
    await session.flush()


async def use_briefing(
    session: AsyncSession, *, token_hash: str, at: datetime
) -> tuple[str, str] | None:
    """Mark an unused, unexpired briefing used and return its (text, voice), in one
    statement (a second fetch, on any instance, finds nothing); None otherwise."""
    result = await session.execute(
        update(BriefingRow)
        .where(
            BriefingRow.token_hash == token_hash,
            BriefingRow.used_at.is_(None),
            BriefingRow.expires_at > at,
        )
        .values(used_at=at)
        .returning(BriefingRow.text, BriefingRow.voice_id)
        .execution_options(synchronize_session=False)
    )
    found = result.first()
    return (found[0], found[1]) if found is not None else None
