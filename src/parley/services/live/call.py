"""A phone call's media stream opening its conversation (API.md section 13).

The carrier sends no credential on the handshake: the stream's `start` carries the
single-use stream token the voice webhook put in the TwiML. Redeeming it
(`authn.authenticate_stream`) names the organization and the `pending` conversation; the
handshake opened here is of that conversation, which the session then configures from its
agent (`Configure(agent=None)`). The socket is watched as
any other (watchdog.py): an end from elsewhere closes it; a call has no token to expire or
be revoked.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from parley.errors import ConversationEnded, Unavailable
from parley.records import Conversation, Status
from parley.services import endings, transfers
from parley.services.authn import StreamPrincipal
from parley.services.context import Context
from parley.services.live import codec
from parley.services.live.handshake import Handshake, revocation_verdict


async def open_call(ctx: Context, stream: StreamPrincipal) -> Handshake:
    """Return the handshake of the conversation of a call whose stream token was redeemed.

    Raises ConversationEnded for a call ended meanwhile, Unavailable when the stores do not
    answer (the call is then ended: its token is used up).
    """
    principal, conversation = stream.principal, stream.conversation
    org_id = principal.org_id
    handshake = Handshake(principal, conversation.id, False, None, None)
    try:  # the watchdog must be able to watch it: the shared store answers (fail closed)
        verdict = await revocation_verdict(ctx, handshake, conversation.id)
    except Unavailable:
        await abandon_call(ctx, org_id=org_id, conversation_id=conversation.id)  # token used
        raise
    if verdict is not None:
        raise ConversationEnded()
    return handshake


async def abandon_call(ctx: Context, *, org_id: str, conversation_id: str) -> None:
    """End a call whose stream was redeemed but whose conversation never went live (its
    agent was disabled meanwhile): it must not stay `pending` with its token used up.
    `ended_by` is `error`: the call failed, no one ended it."""
    await endings.end_conversation(
        ctx,
        org_id=org_id,
        conversation_id=conversation_id,
        ending=endings.CALL_NEVER_LIVE,
        only_from=Status.PENDING,
    )


def with_call_settings(base: codec.Configure, conversation: Conversation) -> codec.Configure:
    """The config of a call's conversation: `base` (its audio formats), and for a call placed
    by the API what it was placed with (API.md section 15): its overrides of the agent's
    settings, the welcome held for the callee, the voicemail message."""
    note = transfers.returning_note(conversation)
    if note is not None:
        return dataclasses.replace(base, resume_note=note)
    if conversation.call_info is None or conversation.call_info.direction != "outbound":
        return base
    settings: dict[str, Any] = dict(conversation.call_settings)
    tools = settings.pop("tools", None)
    overrides: dict[str, Any] = {
        name: settings[name]
        for name in (
            "system_prompt",
            "welcome_message",
            "voice_id",
            "template_variables",
            "no_input_poke_sec",
            "no_input_poke_text",
            "no_input_end_conversation_sec",
            "voicemail_message",
        )
        if name in settings
    }
    if tools is not None:
        overrides["tools"] = tuple(str(name) for name in tools)
    return dataclasses.replace(base, wait_for_callee=True, **overrides)
