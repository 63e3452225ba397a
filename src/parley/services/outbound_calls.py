"""Calls placed through the API (API.md section 15): placing one, the carrier's callbacks
about it, cancelling it.

Rules:
1. `place_call` checks, in the contract's order, storing nothing on a refusal: the fields
   (400, the route's types, then the voice), the agent (404), enabled (409
   `agent_disabled`), a number of its own to call from (400 `no_phone_number`), the
   organization's carrier account (409 `telephony_not_configured`), the texts' template
   variables (400 `missing_template_variable`) and the tools named (400 `unknown_tool`).
   `dry_run` stops there.
2. Then the `pending` conversation is committed, counted active from now (429
   `too_many_active_conversations` past a cap, storing nothing: services/
   active_conversations.py), with `call_info.direction` `outbound` and the
   `config` overrides stored as its call settings, before the carrier is asked, so a
   callback that comes before the answer finds it; the carrier's SID is stored after. A
   refusal or time-out ends it `failed` (502 `carrier_error`): nothing stays pending.
3. The voice webhook of a placed call names its conversation (`?conversation_id=`): the
   answer is a stream token for it, as for an inbound call, and the same one again for a
   repeat while it is unused; `<Hangup/>` for a conversation that is not pending (ended, or
   its stream started), whose token was used or expired, or that another call placed.
4. Status callbacks: `busy`, `no-answer`, `failed`, `canceled` end a `pending` conversation
   (`busy`, `no_answer`, `failed`, `api`); `completed` ends it whatever its state (`user`)
   unless it has ended. Each is idempotent: the ending's guard keeps the first.
5. The machine-detection verdict: the first one stands (a repeat changes nothing). A person
   (or `unknown`) lets the welcome go; a machine gets the voicemail message once, then the
   call hangs up (services/live/callee.py); with no message, or a fax, the conversation
   ends at once and the carrier hangs up. `ended_by` is `voicemail` either way.
6. `cancel_call` ends the conversation as `POST …/end` does (`api`), then tells the carrier
   to hang up a call that had not ended: `canceled` while it rings, else `completed`.
7. A placed call whose carrier never fetched its TwiML is ended `failed` by the housekeeping
   timer after `UNCONNECTED_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Final
from urllib.parse import urlencode

from parley.clock import utcnow
from parley.db.repos import agents as agent_repo
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import projects as project_repo
from parley.db.repos import telephony as telephony_repo
from parley.db.session import Session
from parley.errors import (
    AgentDisabled,
    CallsNotConfigured,
    CarrierError,
    ConversationNotFound,
    NoPhoneNumber,
    TelephonyNotConfigured,
    ValidationFailed,
)
from parley.ids import new_id
from parley.outbound import CarrierAccount
from parley.outbound.carrier import RING_SECONDS, HangUp
from parley.records import (
    Actor,
    Agent,
    CallInfo,
    OutboundCallRequest,
    Status,
    VoiceAnswer,
)
from parley.services import (
    active_conversations,
    agents,
    answering,
    audit,
    endings,
    revocations,
    telephony,
    templates,
)
from parley.services.agents import find_agent
from parley.services.answering import Verdict
from parley.services.context import Context
from parley.services.tools import check_tool_names
from parley.services.voices import SpeechCatalog, check_speech

__all__ = [
    "AMD_PATH",
    "STATUS_PATH",
    "UNCONNECTED_SECONDS",
    "answer_placed_call",
    "call_status",
    "cancel_call",
    "end_unconnected_calls",
    "machine_verdict",
    "place_call",
    "voicemail_message",
]

log = logging.getLogger(__name__)

STATUS_PATH: Final = "/v1/telephony/twilio/status"
AMD_PATH: Final = "/v1/telephony/twilio/amd"
UNCONNECTED_SECONDS: Final = RING_SECONDS + 270
"""A placed call still unconnected this long after it was placed is ended (rule 7): it rings
for 30 s at most; the rest is room for a slow carrier's callbacks."""
CALLBACK_WAIT_SECONDS: Final = 3.0
"""How long a callback for a call SID not stored yet waits for it: the carrier may call back
before its own answer to the create has been stored (rule 2)."""
ENDED_BY_STATUS: Final = {
    "busy": endings.BUSY,
    "no-answer": endings.NO_ANSWER,
    "failed": endings.FAILED,
    "canceled": endings.CALL_CANCELED,
}
"""Rule 4: the `CallStatus`es that end a call that never connected."""


# --- placing a call -----------------------------------------------------------------------


async def place_call(
    ctx: Context,
    *,
    org_id: str,
    request: OutboundCallRequest,
    actor: Actor,
    speech: SpeechCatalog | None,
) -> str | None:
    """Check an outbound call and place it (rules 1 and 2); return its conversation's ID, or
    None for a dry run. Raises the request error of the first check that fails, or
    CarrierError (the conversation then ended `failed`)."""
    settings = request.settings
    voice = settings.get("voice_id")
    check_speech(speech, voice_id=voice if isinstance(voice, str) else None, language=None)
    # The read model's copy (services/read_model.py): the create below locks the agent's
    # row and checks it again, so a disable that answered meanwhile still wins.
    agent = await agents.get_agent(ctx, org_id=org_id, ref=request.agent, project=request.project)
    if agent.disabled_at is not None:
        raise AgentDisabled("The agent is disabled: it cannot start conversations.")
    caller_id = _caller_id(agent, request.from_phone_number)
    account = await _account(ctx, org_id)
    _check_texts(agent, settings)
    tools = settings.get("tools")
    if isinstance(tools, list):
        async with ctx.db.transaction() as session:
            await check_tool_names(session, agent.project.id, tools)
    if request.dry_run:
        return None
    conversation_id = await _create(
        ctx, org_id=org_id, agent=agent, request=request, caller_id=caller_id, actor=actor
    )
    url = (
        ctx.public_url
        + telephony.VOICE_PATH
        + "?"
        + urlencode({"conversation_id": conversation_id})
    )
    try:
        call_sid = await ctx.carrier.create_call(
            account,
            to=request.to_phone_number,
            from_=caller_id,
            url=url,
            status_callback=ctx.public_url + STATUS_PATH,
            amd_callback=ctx.public_url + AMD_PATH,
        )
    except CarrierError:
        await endings.end_conversation(
            ctx,
            org_id=org_id,
            conversation_id=conversation_id,
            ending=endings.FAILED,
            only_from=Status.PENDING,
        )
        raise
    await _bind_call(ctx, org_id=org_id, conversation_id=conversation_id, call_sid=call_sid)
    return conversation_id


def _caller_id(agent: Agent, given: str | None) -> str:
    """The number to call from: `given` if it is one of the agent's, else its first."""
    if not agent.phone_numbers:
        raise NoPhoneNumber("The agent has no phone number to call from.")
    if given is None:
        return agent.phone_numbers[0]
    if given not in agent.phone_numbers:
        raise NoPhoneNumber(
            "from_phone_number is not one of the agent's phone numbers.",
            param_errors={"from_phone_number": "is not one of the agent's numbers"},
        )
    return given


async def _account(ctx: Context, org_id: str) -> CarrierAccount:
    try:
        return await telephony.carrier_account(ctx, org_id=org_id)
    except TelephonyNotConfigured:
        raise CallsNotConfigured() from None


def _check_texts(agent: Agent, settings: Mapping[str, Any]) -> None:
    """Every placeholder of the prompt, the welcome and the voicemail message this call
    uses has a value or a default (MissingTemplateVariable otherwise)."""
    values = settings.get("template_variables") or {}
    defaults = {name: spec.default_value for name, spec in agent.template_variables.items()}
    for text in (
        _setting(settings, "system_prompt", agent.system_prompt),
        _setting(settings, "welcome_message", agent.welcome_message),
        voicemail_message(agent, settings),
    ):
        if text:
            templates.render(text, values=values, defaults=defaults)


def voicemail_message(agent: Agent, settings: Mapping[str, Any]) -> str | None:
    """The message left on an answering machine: the call's, else the agent's (raw, with
    its placeholders)."""
    given = settings.get("voicemail_message")
    return given if isinstance(given, str) else agent.voicemail_message


def _setting(settings: Mapping[str, Any], name: str, default: str | None) -> str | None:
    value = settings.get(name)
    return value if isinstance(value, str) else default


async def _create(
    ctx: Context,
    *,
    org_id: str,
    agent: Agent,
    request: OutboundCallRequest,
    caller_id: str,
    actor: Actor,
) -> str:
    """Commit the placed call's `pending` conversation (rule 2), audited.

    The caps are read and the lease taken first, so the transaction is a unit of work
    (`Database.transact`): on SQLite a burst of placements commits together in one thread
    hop (docs/performance.md, "Calls out and transfers")."""
    conversation_id = new_id("conv")

    async def create(session: Session) -> None:
        # The agent's row lock orders this against a disable: one that has answered wins.
        locked = await find_agent(session, org_id, agent.id, None, for_update=True)
        if locked.disabled_at is not None:
            raise AgentDisabled("The agent is disabled: it cannot start conversations.")
        await conversation_repo.create(
            session,
            org_id=org_id,
            conversation_id=conversation_id,
            agent_id=agent.id,
            project=agent.project,
            at=utcnow(ctx.clock),
            call_info=CallInfo(
                from_phone_number=caller_id,
                to_phone_number=request.to_phone_number,
                twilio_call_sid=None,
                direction="outbound",
            ),
            call_settings=request.settings,
        )
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="conversation.outbound_call",
            target=conversation_id,
            details={"agent": agent.name, "from_phone_number": caller_id},
        )

    async with active_conversations.starting(ctx) as start:
        async with ctx.db.read() as session:
            caps = await project_repo.caps_of(session, agent.project.id)
        # A placed call is active from now (API.md section 17): 429 past a cap.
        await start.take_under(
            caps, org_id=org_id, project_id=agent.project.id, conversation_id=conversation_id
        )
        await ctx.db.transact(create, conversation_repo.UNIQUE_VIOLATIONS)
    return conversation_id


async def _bind_call(ctx: Context, *, org_id: str, conversation_id: str, call_sid: str) -> None:
    """Store the carrier's SID of a placed call: on the conversation, and as the call it
    answers (so its callbacks, and a voice webhook without the conversation's ID, find it).

    A unit of work (`Database.transact`): on SQLite the binds of a burst of placements
    commit together in one thread hop, not one transaction each in turn (20 at once: the
    last waited 250 ms for the others, docs/performance.md)."""

    async def bind(session: Session) -> None:
        await telephony_repo.claim_call(
            session,
            org_id=org_id,
            call_sid=call_sid,
            conversation_id=conversation_id,
            at=utcnow(ctx.clock),
        )
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is not None and state.twilio_call_sid is None:
            await conversation_repo.set_call_sid(session, state, call_sid)

    await ctx.db.transact(bind)


# --- the carrier's callbacks --------------------------------------------------------------


async def answer_placed_call(
    ctx: Context, *, org_id: str, conversation_id: str, params: Sequence[tuple[str, str]]
) -> VoiceAnswer:
    """Answer the voice webhook of a placed call (rule 3), its signature proven."""
    fields = telephony.call_fields(params)
    call_sid = fields["CallSid"]
    now = utcnow(ctx.clock)
    hang_up = VoiceAnswer(hang_up=True)
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if (
            state is None
            or state.call_direction != "outbound"
            or state.twilio_call_sid not in (None, call_sid)
            or state.status != Status.PENDING
        ):
            log.info("voice webhook of a placed call that is not waiting for it: hang up")
            return hang_up
        tokens = await telephony_repo.stream_tokens_of(
            session, org_id=org_id, conversation_id=conversation_id, at=now
        )
        if tokens.unused_sealed is not None:  # a repeat: the same answer
            return VoiceAnswer(
                conversation_id=conversation_id,
                stream_token=ctx.secrets.unseal(tokens.unused_sealed),
            )
        if tokens.any:  # its stream started, or its token expired
            return hang_up
        if state.twilio_call_sid is None:  # the carrier came before its answer was stored
            await telephony_repo.claim_call(
                session, org_id=org_id, call_sid=call_sid, conversation_id=conversation_id, at=now
            )
            await conversation_repo.set_call_sid(session, state, call_sid)
        token = await telephony.new_stream_token(
            session, ctx, org_id=org_id, conversation_id=conversation_id, at=now
        )
    return VoiceAnswer(conversation_id=conversation_id, stream_token=token)


async def call_status(ctx: Context, *, org_id: str, params: Sequence[tuple[str, str]]) -> None:
    """Act on a status callback (rule 4)."""
    fields = telephony.call_fields(params)
    status = fields.get("CallStatus", "")
    ending = ENDED_BY_STATUS.get(status)
    if ending is None and status != "completed":
        return  # initiated, ringing, in-progress: nothing to do
    conversation_id = await _conversation_of(ctx, org_id=org_id, call_sid=fields["CallSid"])
    if conversation_id is None:
        log.info("status callback %s for a call with no conversation: ignored", status)
        return
    await endings.end_conversation(
        ctx,
        org_id=org_id,
        conversation_id=conversation_id,
        ending=ending or endings.CALL_COMPLETED,
        only_from=Status.PENDING if ending is not None else None,
    )


async def machine_verdict(ctx: Context, *, org_id: str, params: Sequence[tuple[str, str]]) -> None:
    """Act on the asynchronous machine-detection callback (rule 5)."""
    fields = telephony.call_fields(params)
    answered_by = fields.get("AnsweredBy", "")
    if answered_by not in answering.KNOWN_VALUES:
        raise ValidationFailed(param_errors={"AnsweredBy": "is not a value the carrier sends"})
    conversation_id = await _conversation_of(ctx, org_id=org_id, call_sid=fields["CallSid"])
    if conversation_id is None:
        log.info("machine-detection callback for a call with no conversation: ignored")
        return
    verdict = answering.verdict_of(answered_by)
    async with ctx.db.transaction() as session:
        state = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if state is None or state.answered_by is not None or state.status == Status.ENDED:
            return  # a repeat, or too late: the first verdict stands
        await conversation_repo.set_answered_by(session, state, answered_by)
        agent = await agent_repo.load(session, state.agent_id) if state.agent_id else None
        pending = await answering.queue_announcement(
            session, ctx, org_id=org_id, conversation_id=conversation_id, verdict=verdict
        )
    await revocations.publish(ctx, pending)
    message = voicemail_message(agent, state.call_settings or {}) if agent else None
    if verdict is Verdict.FAX or (verdict is Verdict.MACHINE and not message):
        await endings.end_conversation(
            ctx, org_id=org_id, conversation_id=conversation_id, ending=endings.VOICEMAIL
        )
        await _hang_up(ctx, org_id=org_id, call_sid=fields["CallSid"], ringing=False)


async def _conversation_of(ctx: Context, *, org_id: str, call_sid: str) -> str | None:
    """The conversation of a call, waiting a little for a placement still being stored."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CALLBACK_WAIT_SECONDS
    while True:
        async with ctx.db.read() as session:
            found = await telephony_repo.conversation_of_call(
                session, org_id=org_id, call_sid=call_sid
            )
        if found is not None or loop.time() >= deadline:
            return found
        await asyncio.sleep(0.1)


# --- cancelling and sweeping --------------------------------------------------------------


async def cancel_call(ctx: Context, *, org_id: str, conversation_id: str, actor: Actor) -> None:
    """End a conversation as `POST …/end` does and hang up its call (rule 6); idempotent.
    Raises ConversationNotFound."""
    async with ctx.db.read() as session:
        state = await conversation_repo.find(session, org_id, conversation_id)
    if state is None:
        raise ConversationNotFound()
    await endings.end_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id, ending=endings.API, actor=actor
    )
    if state.status != Status.ENDED and state.twilio_call_sid is not None:
        await _hang_up(
            ctx,
            org_id=org_id,
            call_sid=state.twilio_call_sid,
            ringing=state.status == Status.PENDING,
        )


async def _hang_up(ctx: Context, *, org_id: str, call_sid: str, ringing: bool) -> None:
    """Tell the carrier to end a call (`canceled` while it may ring, then `completed`); a
    failure is logged: the conversation has ended whatever the carrier says."""
    try:
        account = await telephony.carrier_account(ctx, org_id=org_id)
    except TelephonyNotConfigured:
        log.warning("call %s not hung up: the carrier account is gone", call_sid)
        return
    statuses: tuple[HangUp, ...] = ("canceled", "completed") if ringing else ("completed",)
    for status in statuses:
        try:
            await ctx.carrier.update_call(account, call_sid, status=status)
        except CarrierError as error:
            log.info("carrier refused to mark call %s %s: %s", call_sid, status, error.message)
            continue
        return


async def end_unconnected_calls(ctx: Context) -> int:
    """End the placed calls the carrier never connected (rule 7); return how many."""
    placed_before = utcnow(ctx.clock) - timedelta(seconds=UNCONNECTED_SECONDS)
    async with ctx.db.read() as session:
        found = await telephony_repo.unconnected_placed_calls(session, placed_before=placed_before)
    ended = await endings.end_each(ctx, found, endings.NEVER_CONNECTED, only_from=Status.PENDING)
    if ended:
        log.info("ended %d placed call(s) the carrier never connected", ended)
    return ended
