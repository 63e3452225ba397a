"""Transfers (API.md section 15): a conversation handed to another agent, or its phone call
put through to a number.

Rules:
1. To another agent: the same conversation goes on with that agent (`conversation.agent`
   becomes it) on the socket or the call; `conversation.transferred` is sent with
   `transferred_to: {"agent": {"id", "name"}}`. Only a `live` conversation is handed on.
2. To a number: once the agent has finished speaking, the live call is updated at the
   carrier with a `<Dial>` (`callerId`: the agent's number of the call with
   `use_agent_phone_number`, else the other party's; `timeout="20"`; the `<Number>` with
   `sendDigits` and the `answered` status callback); the carrier then stops the media
   stream, which does not end the conversation. The transfer's state is stored with the
   conversation, so any instance answers the callbacks.
3. The target answered (the `<Number>`'s callback, or the `action` with `DialCallStatus`
   `completed` or `answered`, whichever comes first): the conversation ends `transferred`
   and `conversation.transferred` (`transferred_to: {"phone_number"}`) is written in the
   same transaction, once. A later `action` answers `<Hangup/>`.
4. Not answered (`no-answer`, `busy`, `failed`, `canceled`): with `keep_retrying`, the
   target is dialled again, up to MAX_DIALS times in all; then, or at once, the caller
   comes back to the same conversation: the `action` answers `<Connect><Stream>` with a
   new stream token, and the model is told the transfer was not answered (the session goes
   on with the conversation's history: services/live/call.py). A caller who hung up
   meanwhile (`CallStatus` `completed`) ends it `user`.
5. Each `action` is answered once per attempt: a repeat, or one of an earlier attempt, is
   `<Hangup/>` to its sender and changes nothing.
6. A warm transfer (`keep_listening`): before the bridge the target hears
   `post_transfer_message` and a short summary of the call, in the agent's voice: the
   `<Number url>` answers `<Play>` of audio rendered by Parley at a single-use URL (a random
   token, stored as its SHA-256, valid BRIEFING_SECONDS).
7. A transfer whose state has not moved for STALE_SECONDS ends (`ended_by` `timeout`): the
   carrier told nothing more (a callback lost, the caller gone unseen).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final
from urllib.parse import urlencode

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import telephony as telephony_repo
from parley.db.session import Session
from parley.errors import (
    CarrierError,
    ConversationEnded,
    ConversationNotFound,
    NotFound,
    TelephonyNotConfigured,
)
from parley.outbound import twiml
from parley.records import Agent, AgentRef, Conversation, Outcome, Status, Tool
from parley.services import endings, events, telephony
from parley.services.context import Context
from parley.services.event_payloads import transferred_event_data

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PhoneTransfer:
    """A call to put through to `phone_number` (the tool's settings say how)."""

    tool: Tool
    phone_number: str
    dtmf: str | None


@dataclass(frozen=True, slots=True)
class AgentTransfer:
    """The conversation goes on with `agent`."""

    tool: Tool
    agent: Agent


HandOffRequest = PhoneTransfer | AgentTransfer


async def to_agent(ctx: Context, *, org_id: str, conversation_id: str, agent: Agent) -> None:
    """Rule 1: record that the conversation goes on with `agent`, and announce it."""
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is None:
            raise ConversationNotFound()
        if state.status != Status.LIVE:
            raise ConversationEnded()
        await conversation_repo.set_agent(session, state, agent.id)
        record = await conversation_repo.load(session, replace(state, agent_id=agent.id))

        async def data() -> dict[str, object]:
            return transferred_event_data(record, agent=AgentRef(id=agent.id, name=agent.name))

        await events.emit(
            session, ctx, org_id=org_id, event_type="conversation.transferred", data=data
        )
    log.info("conversation %s handed to agent %s", conversation_id, agent.id)


# --- a phone call put through (rules 2 to 6) ------------------------------------------------

TRANSFER_STATUS_PATH: Final = "/v1/telephony/twilio/transfer"
"""The `<Number>`'s status callback: the target answered."""
DIAL_PATH: Final = "/v1/telephony/twilio/dial"
"""The `<Dial>`'s action: the dial ended (answered and over, or not answered)."""
BRIEFING_PATH: Final = "/v1/telephony/twilio/briefing"
"""The `<Number url>` of a warm transfer: what the target hears before the bridge."""
BRIEFING_AUDIO_PATH: Final = "/v1/telephony/twilio/briefings"
"""`{BRIEFING_AUDIO_PATH}/{token}.wav`: the briefing's audio, served once."""
MAX_DIALS: Final = 3
"""`keep_retrying` dials the target this many times at most."""
BRIEFING_SECONDS: Final = 600
"""How long a briefing's audio can be fetched (once) after the transfer started."""
STALE_SECONDS: Final = 600
"""A transfer that has not moved for this long (the carrier said nothing more) is ended."""
ANSWERED: Final = frozenset({"completed", "answered"})
"""`DialCallStatus`es of a target that answered."""


async def put_through(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    request: PhoneTransfer,
    voice_id: str,
    summary: str,
) -> None:
    """Rule 2: update the live call at the carrier with the transfer's `<Dial>`. Raises
    ConversationEnded (no live call to put through) or CarrierError (nothing changed)."""
    tool = request.tool
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is None or state.status != Status.LIVE or state.twilio_call_sid is None:
            raise ConversationEnded("The conversation has no live call to transfer.")
        call_sid = state.twilio_call_sid
        transfer: dict[str, Any] = {
            "state": "dialing",
            "attempt": 1,
            "phone_number": request.phone_number,
            "dtmf": request.dtmf,
            "caller_id": _caller_id(state, agent_number=bool(tool.use_agent_phone_number)),
            "warm": bool(tool.keep_listening),
            "briefing": _briefing_text(tool.post_transfer_message, summary),
            "voice_id": voice_id,
            "retry": tool.on_transfer_no_answer == "keep_retrying",
        }
        document = await _dial_document(session, ctx, state, transfer, at=now)
        await conversation_repo.set_transfer(session, state, transfer, at=now)
    try:
        account = await telephony.carrier_account(ctx, org_id=org_id)
        await ctx.carrier.update_call(account, call_sid, twiml=document)
    except (CarrierError, TelephonyNotConfigured):
        await _forget(ctx, org_id=org_id, conversation_id=conversation_id)
        raise
    log.info("call of conversation %s put through to a number", conversation_id)


async def stream_left(
    ctx: Context, *, org_id: str, conversation_id: str, measured: Outcome
) -> None:
    """Rule 2: the call's stream stopped for the transfer: store what it measured; the
    conversation stays live, waiting for the carrier's callbacks."""
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is not None:
            await conversation_repo.set_analysis(session, state, measured)


async def target_answered(ctx: Context, *, org_id: str, conversation_id: str) -> None:
    """Rule 3: the target answered: the conversation ends `transferred`, announced once."""
    await _end_transferred(ctx, org_id=org_id, conversation_id=conversation_id)


async def dial_ended(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    attempt: int,
    params: Sequence[tuple[str, str]],
) -> str:
    """Rules 3 to 5: the `<Dial>`'s action; return the TwiML that carries the call on."""
    fields = dict(params)
    dialled = fields.get("DialCallStatus", "")
    if dialled in ANSWERED:
        await _end_transferred(ctx, org_id=org_id, conversation_id=conversation_id)
        return twiml.hang_up()
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        transfer = dict(state.transfer or {}) if state is not None else {}
        if (
            state is None
            or state.status != Status.LIVE
            or transfer.get("state") != "dialing"
            or transfer.get("attempt") != attempt
        ):
            return twiml.hang_up()  # ended, or a repeat of an action already answered
        if fields.get("CallStatus") == "completed":  # the caller hung up meanwhile
            caller_gone = True
        else:
            caller_gone = False
            if transfer.get("retry") and attempt < MAX_DIALS:
                transfer["attempt"] = attempt + 1
                document = await _dial_document(session, ctx, state, transfer, at=now)
                await conversation_repo.set_transfer(session, state, transfer, at=now)
                return document
            transfer["state"] = "returning"
            transfer["note"] = (
                f"The transfer to {transfer.get('phone_number')} was not answered "
                f"({dialled or 'no answer'}). The caller is back with you: tell them, and "
                "offer another way to help."
            )
            await conversation_repo.set_transfer(session, state, transfer, at=now)
            token = await telephony.new_stream_token(
                session, ctx, org_id=org_id, conversation_id=conversation_id, at=now
            )
    if caller_gone:
        await endings.end_conversation(
            ctx, org_id=org_id, conversation_id=conversation_id, ending=endings.CALL_COMPLETED
        )
        return twiml.hang_up()
    log.info("transfer of conversation %s not answered: the caller is back", conversation_id)
    return twiml.connect_stream(
        telephony.media_url(ctx), [("conversation_id", conversation_id), ("stream_token", token)]
    )


def briefing(ctx: Context, *, token: str) -> str:
    """Rule 6: a warm transfer's `<Number url>`: play the briefing's audio to the target."""
    return twiml.play(f"{ctx.public_url}{BRIEFING_AUDIO_PATH}/{token}.wav")


async def briefing_audio(ctx: Context, *, token: str) -> tuple[str, str]:
    """Rule 6: use up a briefing token; return what to say and in which voice. Raises
    NotFound for a token unknown, used or expired."""
    if not BRIEFING_TOKEN.fullmatch(token):
        raise NotFound("No such briefing.")
    async with ctx.db.transaction() as session:
        found = await telephony_repo.use_briefing(
            session, token_hash=telephony.token_hash(token), at=utcnow(ctx.clock)
        )
    if found is None:
        raise NotFound("No such briefing, or it was played already.")
    return found


def returning_note(conversation: Conversation) -> str | None:
    """The note the model gets when the caller comes back from a transfer (rule 5)."""
    transfer = conversation.transfer or {}
    note = transfer.get("note")
    return str(note) if transfer.get("state") == "returning" and note else None


async def end_stale(ctx: Context) -> int:
    """Rule 7: end the conversations whose transfer has not moved for STALE_SECONDS."""
    before = utcnow(ctx.clock) - timedelta(seconds=STALE_SECONDS)
    async with ctx.db.read() as session:
        found = await conversation_repo.stale_transfers(session, since_before=before)
    ended = await endings.end_each(ctx, found, endings.TRANSFER_LOST, only_from=Status.LIVE)
    if ended:
        log.info("ended %d conversation(s) whose transfer never finished", ended)
    return ended


async def _end_transferred(ctx: Context, *, org_id: str, conversation_id: str) -> None:
    async with ctx.db.read() as session:
        state = await conversation_repo.find(session, org_id, conversation_id)
    number = str((state.transfer or {}).get("phone_number")) if state is not None else None

    async def announce(session: Session) -> None:
        moved = await conversation_repo.find(session, org_id, conversation_id)
        if moved is None:
            return
        record = await conversation_repo.load(session, moved)

        async def data() -> dict[str, object]:
            return transferred_event_data(record, phone_number=number)

        await events.emit(
            session, ctx, org_id=org_id, event_type="conversation.transferred", data=data
        )

    await endings.end_conversation(
        ctx,
        org_id=org_id,
        conversation_id=conversation_id,
        ending=endings.TRANSFERRED,
        then=announce,
    )


async def _forget(ctx: Context, *, org_id: str, conversation_id: str) -> None:
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is not None:
            await conversation_repo.set_transfer(session, state, None, at=utcnow(ctx.clock))


async def _dial_document(
    session: Session,
    ctx: Context,
    state: conversation_repo.ConversationState,
    transfer: Mapping[str, Any],
    *,
    at: datetime,
) -> str:
    """The `<Dial>` of one attempt; a warm one's briefing stored under a fresh token."""
    conversation = urlencode({"conversation_id": state.id})
    briefing_url = None
    if transfer.get("warm"):
        token = secrets.token_urlsafe(24)
        await telephony_repo.insert_briefing(
            session,
            token_hash=telephony.token_hash(token),
            org_id=state.org_id,
            conversation_id=state.id,
            text=str(transfer.get("briefing") or ""),
            voice_id=str(transfer.get("voice_id") or ""),
            expires_at=at + timedelta(seconds=BRIEFING_SECONDS),
        )
        briefing_url = f"{ctx.public_url}{BRIEFING_PATH}?{conversation}&token={token}"
    attempt = urlencode({"attempt": transfer.get("attempt", 1)})
    return twiml.dial(
        twiml.Dial(
            number=str(transfer["phone_number"]),
            caller_id=transfer.get("caller_id"),
            action=f"{ctx.public_url}{DIAL_PATH}?{conversation}&{attempt}",
            status_callback=f"{ctx.public_url}{TRANSFER_STATUS_PATH}?{conversation}",
            send_digits=transfer.get("dtmf"),
            briefing_url=briefing_url,
        )
    )


def _caller_id(state: conversation_repo.ConversationState, *, agent_number: bool) -> str | None:
    """The agent's number of the call, or the other party's (rule 2)."""
    inbound = state.call_direction != "outbound"
    agents = state.to_phone_number if inbound else state.from_phone_number
    theirs = state.from_phone_number if inbound else state.to_phone_number
    return agents if agent_number else theirs


def _briefing_text(message: str | None, summary: str) -> str:
    return " ".join(part for part in (message or "", summary) if part).strip()


BRIEFING_TOKEN: Final = re.compile(r"[A-Za-z0-9_-]{32}")
