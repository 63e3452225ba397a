"""Phone calls through a carrier speaking Twilio's protocol (API.md section 13), up to the
media socket: the carrier account, the signed voice webhook and the stream tokens.

Rules:
1. An organization sets at most one Twilio account; an `account_sid` (`AC` + 32 hex digits,
   Twilio's shape) belongs to one organization (409 `account_taken`). The auth token (32 hex
   digits, as Twilio issues them) is stored sealed (`ctx.secrets`), never returned, never
   logged: only its last 4 characters are shown.
2. The voice webhook's credential is its `X-Twilio-Signature`, proven by
   services/authn.py (`authenticate_carrier`, its rule 6) before the call is answered here;
   a stream token is redeemed here, for `authn.authenticate_stream`.
3. A call to a number that is not an enabled agent's of that organization is rejected and
   makes no conversation. The agent's row is locked first, as the socket's `start_live`
   locks it, so a disable that has answered wins the race.
4. An answered call gets a `pending` conversation with its `call_info` and a stream token:
   single-use, bound to that conversation, valid 60 s, found by its SHA-256 and kept sealed
   until used (rule 5). Redeeming consumes it in one UPDATE (two instances cannot both
   redeem it); a wrong token changes nothing. A conversation whose token expired unused is
   ended by the housekeeping timer (`end_expired_calls`).
5. One answer per `CallSid` (Twilio's signature has no timestamp, so this is the replay
   guard): the first request of a call claims it (a primary key, so one wins on any
   instance) before anything else; a repeat gets that answer again, the same conversation
   and stream token while the token is unused, unexpired and the conversation `pending`,
   and `<Reject/>` otherwise (a rejected call stays rejected). Never a second conversation.
6. An answered call counts as active from its answer (API.md section 17): past its
   project's or organization's cap it is rejected busy, `<Reject reason="busy"/>`, and
   makes no conversation (services/active_conversations.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import telephony as telephony_repo
from parley.db.session import Session
from parley.errors import (
    AccountTaken,
    AgentNotFound,
    Forbidden,
    InvalidStreamToken,
    TelephonyNotConfigured,
    TooManyActiveConversations,
    ValidationFailed,
)
from parley.ids import is_valid_conversation_id, new_id
from parley.outbound import CarrierAccount, twiml
from parley.records import Actor, CallInfo, Conversation, Status, TwilioAccount, VoiceAnswer
from parley.services import active_conversations, audit, endings
from parley.services.context import Context

__all__ = [
    "MEDIA_PATH",
    "STREAM_TOKEN_TTL_SECONDS",
    "TWIML_MEDIA_TYPE",
    "VOICE_PATH",
    "answer_call",
    "call_fields",
    "carrier_account",
    "delete_twilio_account",
    "end_expired_calls",
    "get_twilio_account",
    "media_url",
    "new_stream_token",
    "put_twilio_account",
    "redeem_stream_token",
    "token_hash",
    "voice_twiml",
    "voice_url",
]

log = logging.getLogger(__name__)

VOICE_PATH: Final = "/v1/telephony/twilio/voice"
MEDIA_PATH: Final = "/v1/telephony/twilio/media"
STREAM_TOKEN_TTL_SECONDS: Final = 60
ACCOUNT_SID: Final = re.compile(r"AC[0-9a-fA-F]{32}")
AUTH_TOKEN: Final = re.compile(r"[0-9a-fA-F]{32}")
ACCOUNT_SID_RULE: Final = "must be 'AC' followed by 32 hexadecimal digits"
AUTH_TOKEN_RULE: Final = "must be 32 hexadecimal digits"  # noqa: S105 - a rule, not a secret
CALL_FIELD: Final = re.compile(r"[\x21-\x7e]{1,64}")
"""CallSid, From and To: 1-64 visible ASCII characters (E.164, `anonymous`, `client:…`)."""
MAX_STREAM_TOKEN_LENGTH: Final = 128


# --- the carrier account -----------------------------------------------------------


TWIML_MEDIA_TYPE: Final = twiml.MEDIA_TYPE


def voice_twiml(ctx: Context, answer: VoiceAnswer) -> str:
    """The voice webhook's TwiML for `answer`: the media stream, a refusal or a hang-up."""
    if answer.hang_up:
        return twiml.hang_up()
    if answer.rejected or answer.stream_token is None or answer.conversation_id is None:
        return twiml.reject_busy()
    return twiml.connect_stream(
        media_url(ctx),
        [("conversation_id", answer.conversation_id), ("stream_token", answer.stream_token)],
    )


def voice_url(ctx: Context) -> str:
    """The URL to paste into the carrier's console as the number's voice webhook."""
    return ctx.public_url + VOICE_PATH


def media_url(ctx: Context) -> str:
    """The media socket's URL: `wss://` for an https public URL, `ws://` for http."""
    scheme, _, rest = ctx.public_url.partition("://")
    return ("wss" if scheme == "https" else "ws") + "://" + rest + MEDIA_PATH


async def put_twilio_account(
    ctx: Context, *, org_id: str, account_sid: str, auth_token: str, actor: Actor
) -> TwilioAccount:
    """Set (or replace) the organization's Twilio account; 409 if another organization has
    that `account_sid`."""
    problems = {}
    if not ACCOUNT_SID.fullmatch(account_sid):
        problems["account_sid"] = ACCOUNT_SID_RULE
    if not AUTH_TOKEN.fullmatch(auth_token):
        problems["auth_token"] = AUTH_TOKEN_RULE  # never echoes the value
    if problems:
        raise ValidationFailed(param_errors=problems)
    sealed = ctx.secrets.seal(auth_token)
    async with ctx.db.transaction(telephony_repo.UNIQUE_VIOLATIONS) as session:
        owner = await telephony_repo.sid_owner(session, account_sid)
        if owner not in (None, org_id):
            raise AccountTaken()
        account = await telephony_repo.put_account(
            session,
            org_id=org_id,
            account_sid=account_sid,
            sealed_token=sealed,
            last4=auth_token[-4:],
            at=utcnow(ctx.clock),
        )
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="telephony.update",
            target=account_sid,
            details={"carrier": "twilio", "auth_token_last4": account.auth_token_last4},
        )
    return account


async def get_twilio_account(ctx: Context, *, org_id: str) -> TwilioAccount:
    """Return the organization's Twilio account; 404 `telephony_not_configured` if none."""
    async with ctx.db.read() as session:
        account = await telephony_repo.get_account(session, org_id)
    if account is None:
        raise TelephonyNotConfigured()
    return account


async def carrier_account(ctx: Context, *, org_id: str) -> CarrierAccount:
    """The organization's carrier credentials, unsealed, for one call of the carrier's REST
    API (`ctx.carrier`); raise TelephonyNotConfigured if none is set. Never log the result."""
    async with ctx.db.read() as session:
        account = await telephony_repo.get_account(session, org_id)
        found = (
            await telephony_repo.sealed_token_of(session, account.account_sid)
            if account is not None
            else None
        )
    if account is None or found is None or found[0] != org_id:
        raise TelephonyNotConfigured()
    return CarrierAccount(account_sid=account.account_sid, auth_token=ctx.secrets.unseal(found[1]))


async def delete_twilio_account(ctx: Context, *, org_id: str, actor: Actor) -> None:
    """Forget the organization's Twilio account; 404 `telephony_not_configured` if none."""
    async with ctx.db.transaction() as session:
        account = await telephony_repo.get_account(session, org_id)
        if account is None or not await telephony_repo.delete_account(session, org_id):
            raise TelephonyNotConfigured()
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="telephony.delete",
            target=account.account_sid,
            details={"carrier": "twilio"},
        )


# --- the voice webhook -------------------------------------------------------------


async def answer_call(
    ctx: Context, *, org_id: str, params: Sequence[tuple[str, str]]
) -> VoiceAnswer:
    """Answer the voice webhook of `org_id`'s account, its signature proven (rule 2): reject
    the call or make its `pending` conversation and stream token.

    `params` are the decoded form fields in the order sent. Raises ValidationFailed for a
    request that lacks `CallSid` or `To`.
    """
    fields = call_fields(params)
    call = CallInfo(
        from_phone_number=fields.get("From"),
        to_phone_number=fields["To"],
        twilio_call_sid=fields["CallSid"],
    )
    call_sid = fields["CallSid"]
    conversation_id = new_id("conv")
    now = utcnow(ctx.clock)
    async with (
        active_conversations.starting(ctx) as start,
        ctx.db.transaction(conversation_repo.UNIQUE_VIOLATIONS) as session,
    ):
        claimed = await telephony_repo.claim_call(
            session, org_id=org_id, call_sid=call_sid, conversation_id=conversation_id, at=now
        )
        if not claimed:  # rule 5: a repeat of a call answered already
            return await _answer_again(ctx, session, org_id=org_id, call_sid=call_sid, at=now)
        agent_id = await _enabled_agent_for(session, org_id, fields["To"])
        if agent_id is None:
            log.info("call to a number that answers no enabled agent: rejected")
            await telephony_repo.reject_claimed_call(session, org_id=org_id, call_sid=call_sid)
            return VoiceAnswer()
        agent = await agent_repo.load(session, agent_id)
        try:  # rule 6: an answered call is active
            await start.take(
                session, org_id=org_id, project_id=agent.project.id, conversation_id=conversation_id
            )
        except TooManyActiveConversations:
            log.info("call past a cap on active conversations: rejected (busy)")
            await telephony_repo.reject_claimed_call(session, org_id=org_id, call_sid=call_sid)
            return VoiceAnswer()
        state = await conversation_repo.create(
            session,
            org_id=org_id,
            conversation_id=conversation_id,
            agent_id=agent.id,
            project=agent.project,
            at=now,
            call_info=call,
        )
        token = await new_stream_token(
            session, ctx, org_id=org_id, conversation_id=state.id, at=now
        )
    return VoiceAnswer(conversation_id=state.id, stream_token=token)


async def _answer_again(
    ctx: Context, session: Session, *, org_id: str, call_sid: str, at: datetime
) -> VoiceAnswer:
    """The answer to a repeat of the call `call_sid` (rule 5)."""
    found = await telephony_repo.answered_call(session, org_id=org_id, call_sid=call_sid, at=at)
    if found is None or found.conversation_id is None or found.token_sealed is None:
        log.info(
            "repeated voice webhook of call %s, no longer waiting for its stream: rejected",
            call_sid,
        )
        return VoiceAnswer()
    log.info("repeated voice webhook of call %s: the same answer", call_sid)
    return VoiceAnswer(
        conversation_id=found.conversation_id, stream_token=ctx.secrets.unseal(found.token_sealed)
    )


def call_fields(params: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The call's fields, checked once the request is known to come from the carrier."""
    fields: dict[str, str] = {}
    for name, value in params:
        fields.setdefault(name, value)
    problems = {}
    for name in ("CallSid", "To", "From"):
        given = fields.get(name)
        if given is None:
            if name != "From":
                problems[name] = "is required"
        elif not CALL_FIELD.fullmatch(given):
            problems[name] = "must be 1-64 visible ASCII characters"
    if problems:
        raise ValidationFailed(param_errors=problems)
    return fields


async def _enabled_agent_for(session: Session, org_id: str, number: str) -> str | None:
    """The ID of the enabled agent of `org_id` that `number` belongs to, its row locked."""
    agent_id = await telephony_repo.agent_of_number(session, number)
    if agent_id is None:
        return None
    try:
        agent = await agent_repo.find(session, org_id, agent_id, project_id=None, for_update=True)
    except (AgentNotFound, Forbidden):  # deleted meanwhile, or another organization's
        return None
    if agent.disabled_at is not None:
        return None
    # Read again under the lock: a release that committed before it freed the number.
    if await telephony_repo.agent_of_number(session, number) != agent.id:
        return None
    return agent.id


# --- a test run's call ----------------------------------------------------------------


async def open_test_call(
    ctx: Context,
    *,
    org_id: str,
    agent_id: str,
    test_run_id: str,
    tool_overrides: Mapping[str, Any] | None,
) -> tuple[str, str]:
    """A test run's phone call (API.md section 19): its `pending` conversation, with
    `call_info` `{"direction": "test", "to_phone_number": the agent's first number or
    null}` and a made-up call SID (`TEST…`: no carrier knows it), and the stream token the
    runner presents as a carrier would; (conversation ID, token)."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction(conversation_repo.UNIQUE_VIOLATIONS) as session:
        agent = await agent_repo.load(session, agent_id)
        call = CallInfo(
            from_phone_number=None,
            to_phone_number=agent.phone_numbers[0] if agent.phone_numbers else None,
            twilio_call_sid="TEST" + secrets.token_hex(16),
            direction="test",
        )
        state = await conversation_repo.create(
            session,
            org_id=org_id,
            conversation_id=new_id("conv"),
            agent_id=agent.id,
            project=agent.project,
            at=now,
            call_info=call,
            test_run_id=test_run_id,
            tool_overrides=tool_overrides,
        )
        token = await new_stream_token(
            session, ctx, org_id=org_id, conversation_id=state.id, at=now
        )
    return state.id, token


# --- stream tokens -----------------------------------------------------------------


def token_hash(token: str) -> str:
    """How a single-use token is stored: its SHA-256, hex (stream tokens, briefings)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


async def new_stream_token(
    session: Session, ctx: Context, *, org_id: str, conversation_id: str, at: datetime
) -> str:
    """Make a call's stream token (rule 4), stored by its SHA-256 and sealed; return it."""
    token = secrets.token_urlsafe(32)
    await telephony_repo.insert_stream_token(
        session,
        token_hash=token_hash(token),
        token_sealed=ctx.secrets.seal(token),
        org_id=org_id,
        conversation_id=conversation_id,
        expires_at=at + timedelta(seconds=STREAM_TOKEN_TTL_SECONDS),
    )
    return token


async def redeem_stream_token(
    ctx: Context, *, conversation_id: str, token: str
) -> tuple[str, Conversation]:
    """Use up a call's stream token; return the organization and the `pending` conversation
    (or the live one a transfer that was not answered brings the caller back to).

    Raises InvalidStreamToken for a wrong, used, expired or foreign token (or a conversation
    no longer pending), without using up the right one (rule 4).
    """
    if not token or len(token) > MAX_STREAM_TOKEN_LENGTH:
        raise InvalidStreamToken()
    if not is_valid_conversation_id(conversation_id):
        raise InvalidStreamToken()
    async with ctx.db.transaction() as session:
        org_id = await telephony_repo.use_stream_token(
            session,
            token_hash=token_hash(token),
            conversation_id=conversation_id,
            at=utcnow(ctx.clock),
        )
        if org_id is None:
            raise InvalidStreamToken()
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        returning = (
            state is not None
            and state.status == Status.LIVE
            and (state.transfer or {}).get("state") == "returning"
        )
        if state is None or not (state.status == Status.PENDING or returning):
            raise InvalidStreamToken()
        return org_id, await conversation_repo.load(session, state)


async def end_expired_calls(ctx: Context) -> int:
    """End the `pending` calls whose stream token expired unused; return how many."""
    async with ctx.db.read() as session:
        expired = await telephony_repo.unanswered_calls(session, at=utcnow(ctx.clock))
    ended = await endings.end_each(
        ctx, expired, endings.STREAM_NEVER_STARTED, only_from=Status.PENDING
    )
    if ended:
        log.info("ended %d call(s) whose media stream never started", ended)
    return ended
