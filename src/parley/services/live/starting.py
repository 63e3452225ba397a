"""How a `config` starts its conversation (API.md sections 8, 13 and 15): every check first,
so a refused config leaves nothing behind and may be sent again; then the conversation goes
live (made, or a pending one started), or, for a caller back from a transfer that was not
answered, goes on with its history.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from parley import engine
from parley.errors import AgentNotAllowed, Forbidden, NotFound, ValidationFailed
from parley.records import Agent, Conversation
from parley.services import agents, conversations
from parley.services.context import Context
from parley.services.live import codec
from parley.services.live.handshake import Handshake
from parley.services.live.setup import Setup
from parley.services.live.silence import settings_for
from parley.services.silence import SilenceSettings


@dataclass(frozen=True, slots=True)
class Started:
    """A conversation that went live, and what its `config` decided."""

    conversation: Conversation
    agent: Agent
    event: codec.Configure
    """The config as it holds (a resumed call's: with its conversation's values)."""
    setup: Setup
    silence: SilenceSettings
    history: tuple[engine.Turn, ...] = ()
    """The conversation so far, when it goes on (a caller back from a transfer)."""


async def start(ctx: Context, handshake: Handshake, event: codec.Configure) -> Started:
    """Check the config, then make the conversation live. Raises the request error the
    config deserves, AgentDisabled, AgentNotAllowed, ConversationEnded or ConversationExists."""
    for requested in (event.input_format, event.output_format):
        if requested is not None:
            engine.AudioFormat.parse(requested)  # refuse before the conversation goes live
    org_id = handshake.principal.org_id
    ref, project = await _agent_of(ctx, handshake, event)
    if handshake.principal.agent_id is None:
        checked = await agents.get_agent(ctx, org_id=org_id, ref=ref, project=project)
    else:
        checked = await _token_agent(ctx, org_id, handshake.principal.agent_id, ref, project)
    setup = await Setup.check(ctx, event, checked)
    silence = settings_for(checked, event)
    if event.resume_note is not None:
        return await _resume(ctx, handshake, event, silence)
    token = handshake.principal.token
    conversation, agent = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=handshake.conversation_id,
        create_if_missing=handshake.create_if_missing,
        agent=ref,
        project=project,
        end_user=token.sub if token is not None else None,
        retention=event.data_retention_policy,
        redact=event.enable_redaction,
    )
    if agent.updated_at != checked.updated_at:  # changed meanwhile: check it again
        setup = await Setup.check(ctx, event, agent)
        silence = settings_for(agent, event)
    setup = dataclasses.replace(setup, redact=conversation.is_redacted)  # as it went live
    return Started(conversation, agent, event, setup, silence)


async def _resume(
    ctx: Context, handshake: Handshake, event: codec.Configure, silence: SilenceSettings
) -> Started:
    """A caller back from a transfer: the same conversation, its values and history, and no
    welcome (services/transfers.py rule 4)."""
    conversation, agent = await conversations.resume_live(
        ctx,
        org_id=handshake.principal.org_id,
        conversation_id=handshake.conversation_id or "",
    )
    event = dataclasses.replace(event, template_variables=dict(conversation.template_variables))
    setup = dataclasses.replace(
        await Setup.check(ctx, event, agent),
        welcome_message=None,
        redact=conversation.is_redacted,  # as it went live first
    )
    history = tuple(
        engine.Turn("user" if item.role == "user" else "assistant", item.text)
        for item in conversation.items
        if item.text
    )
    return Started(conversation, agent, event, setup, silence, history)


async def _token_agent(
    ctx: Context, org_id: str, agent_id: str, ref: str, project: str | None
) -> Agent:
    """The agent of a conversation token's config: its own, or AgentNotAllowed (API.md
    section 17; whether another agent exists is not told)."""
    try:
        agent = await agents.get_agent(ctx, org_id=org_id, ref=ref, project=project)
    except (NotFound, Forbidden):
        raise AgentNotAllowed() from None
    if agent.id != agent_id:
        raise AgentNotAllowed()
    return agent


async def _agent_of(
    ctx: Context, handshake: Handshake, event: codec.Configure
) -> tuple[str, str | None]:
    """The agent a config names, or (`agent` None) that of the pending conversation the
    handshake names: a phone call is configured from its stored conversation."""
    if event.agent is not None:
        return event.agent, event.project
    conversation_id = handshake.conversation_id
    if conversation_id is None:
        raise ValidationFailed(param_errors={"agent": "is required"})
    found = await conversations.get_conversation(
        ctx, org_id=handshake.principal.org_id, conversation_id=conversation_id
    )
    if found.agent is None:
        raise ValidationFailed(param_errors={"agent": "the conversation has no agent"})
    return found.agent.id, None
