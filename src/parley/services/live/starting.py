"""How a `config` starts its conversation (API.md sections 8, 13 and 15): every check first,
so a refused config leaves nothing behind and may be sent again; then the conversation goes
live (made, or a pending one started), or, for a caller back from a transfer that was not
answered, goes on with its history.

An agent with a configuration endpoint (API.md section 17) has it called once its
conversation is live (so a refused start calls nothing): its answer overrides the config's
and the agent's settings, checked as a config's are; a failure is `Refused`, which the
session ends by that failure's ending before the engine starts. An agent without one waits
for nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from parley import engine
from parley.errors import (
    AgentNotAllowed,
    ConfigurationEndpointFailed,
    ConfigurationEndpointInvalidResponse,
    Forbidden,
    InvalidRequest,
    NotFound,
    ValidationFailed,
)
from parley.records import Agent, ConfigurationEndpoint, Conversation, Unset
from parley.services import agents, configuration_endpoints, conversations, endings
from parley.services.configuration_endpoints import AgentView
from parley.services.context import Context
from parley.services.endings import Ending
from parley.services.live import codec
from parley.services.live.handshake import Handshake
from parley.services.live.setup import Setup
from parley.services.live.silence import settings_for
from parley.services.silence import SilenceSettings
from parley.services.voices import SpeechCatalog


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


@dataclass(frozen=True, slots=True)
class Refused:
    """A conversation that went live but that its agent's configuration endpoint ended
    before it started: the session ends it by `ending` and sends `error`."""

    conversation: Conversation
    error: ConfigurationEndpointFailed
    ending: Ending


async def start(
    ctx: Context,
    handshake: Handshake,
    event: codec.Configure,
    speech: SpeechCatalog | None = None,
) -> Started | Refused:
    """Check the config (its languages against `speech`), then make the conversation live,
    configured by the agent's configuration endpoint if it has one. Raises the request
    error the config deserves, AgentDisabled, AgentNotAllowed, ConversationEnded or
    ConversationExists."""
    for requested in (event.input_format, event.output_format):
        if requested is not None:
            engine.AudioFormat.parse(requested)  # refuse before the conversation goes live
    org_id = handshake.principal.org_id
    ref, project = await _agent_of(ctx, handshake, event)
    if handshake.principal.agent_id is None:
        checked = await agents.get_agent(ctx, org_id=org_id, ref=ref, project=project)
    else:
        checked = await _token_agent(ctx, org_id, handshake.principal.agent_id, ref, project)
    setup = await Setup.check(ctx, event, checked, speech)
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
        setup = await Setup.check(ctx, event, agent, speech)
        silence = settings_for(agent, event)
    setup = dataclasses.replace(setup, redact=conversation.is_redacted)  # as it went live
    if (endpoint := agent.configuration_endpoint) is not None:
        try:
            event, agent, setup = await _configured(
                ctx, endpoint, conversation, agent, event, setup
            )
        except ConfigurationEndpointFailed as error:
            ending = endings.CONFIGURATION_ENDPOINT_FAILURES[error.code]
            return Refused(conversation, error, ending)
    return Started(conversation, agent, event, setup, silence)


async def _configured(
    ctx: Context,
    endpoint: ConfigurationEndpoint,
    conversation: Conversation,
    agent: Agent,
    event: codec.Configure,
    setup: Setup,
) -> tuple[codec.Configure, Agent, Setup]:
    """Call the agent's configuration endpoint and apply its answer: the config, the agent
    and the setup as this conversation runs them. Raises ConfigurationEndpointFailed."""
    items = event.tools if event.tools is not None else agent.tools
    view = AgentView(
        project_name=agent.project.name,
        name=agent.name,
        welcome_message=(
            event.welcome_message if event.welcome_message is not None else agent.welcome_message
        ),
        system_prompt=_given(event.system_prompt, agent.system_prompt),
        tools=[item if isinstance(item, str) else item.name for item in items],
        boosted_keywords=agent.boosted_keywords,
    )
    overrides = await configuration_endpoints.fetch_overrides(
        ctx, endpoint, agent=view, conversation_id=conversation.id, call_info=conversation.call_info
    )
    changes: dict[str, Any] = {}
    if not isinstance(overrides.welcome_message, Unset):
        changes["welcome_message"] = overrides.welcome_message or ""  # "": no welcome
    if not isinstance(overrides.system_prompt, Unset):
        changes["system_prompt"] = overrides.system_prompt
    if not isinstance(overrides.tools, Unset):
        changes["tools"] = overrides.tools
    if not isinstance(overrides.template_variables, Unset):
        given = dict(event.template_variables or {})
        changes["template_variables"] = given | dict(overrides.template_variables)
    if not isinstance(overrides.boosted_keywords, Unset):
        agent = dataclasses.replace(agent, boosted_keywords=overrides.boosted_keywords)
    if not changes:
        return event, agent, setup
    event = dataclasses.replace(event, **changes)
    try:
        checked = await Setup.check(ctx, event, agent)
    except InvalidRequest as refused:  # an unknown tool, a placeholder without a value
        raise ConfigurationEndpointInvalidResponse(
            f"The agent's configuration endpoint answered a configuration that cannot be used: "
            f"{refused.message}"
        ) from None
    return event, agent, dataclasses.replace(checked, redact=setup.redact)


def _given(value: str | None, default: str) -> str:
    return value if value is not None else default


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
