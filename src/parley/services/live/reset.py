"""A `reset` on a live conversation (API.md section 17): it goes on with new settings.

The reset's `config` is read as a `config` is (the same checks; a member it leaves out takes
the agent's value, as at the start), against the conversation's agent. What changes at
once, for every later reply: the system prompt with its template variables, the tools, the
voice and the silence options. The conversation keeps its ID, its history and its items;
the welcome is not spoken again (it goes on: `say` speaks anything now).

What is fixed when the conversation starts may only be repeated with the value in force (a
client that sends its whole config again): the agent and its project, the input and output
formats (the client's audio runs in them), and what the conversation keeps and where
(`data_retention_policy`, `external_storage_policy`, `enable_redaction`). A different value
is 400 `validation_error` naming the member; nothing of the reset is applied then.
"""

from __future__ import annotations

from dataclasses import dataclass

from parley import engine
from parley.errors import ValidationFailed
from parley.records import Agent, Unset
from parley.services import agents, conversations
from parley.services.context import Context
from parley.services.live import codec
from parley.services.live.setup import Setup
from parley.services.live.silence import SilenceTimer, settings_for
from parley.services.live.tools import ConversationTools

FIXED = "is fixed when the conversation starts"


@dataclass(frozen=True, slots=True)
class Settings:
    """What a conversation runs with, as its `config` (or its last `reset`) decided."""

    agent_id: str
    input_format: engine.AudioFormat
    output_format: engine.AudioFormat
    setup: Setup
    voice_id: str


async def reset(
    ctx: Context,
    live: engine.ConversationEngine,
    tools: ConversationTools,
    silence: SilenceTimer | None,
    *,
    org_id: str,
    conversation_id: str,
    current: Settings,
    event: codec.Configure,
) -> Settings:
    """Check the reset's config against what is in force, then apply it (see the module
    doc); raise the request error it deserves, having applied nothing."""
    agent = await agents.get_agent(
        ctx,
        org_id=org_id,
        ref=current.agent_id if event.agent is None else event.agent,
        project=None if event.agent is None else event.project,
    )
    if agent.id != current.agent_id:
        raise ValidationFailed(param_errors={"agent": f"{FIXED}: a transfer changes it"})
    _check_formats(event, current)
    setup = await Setup.check(ctx, event, agent)
    _check_kept(event, setup, current.setup)
    quiet = settings_for(agent, event)
    voice_id = event.voice_id or agent.voice_id
    tools.use(setup.tools, built_ins=setup.built_ins)
    await live.update_system_prompt(setup.system_prompt)
    await live.update_tools(tools.definitions())
    if voice_id != current.voice_id:
        await live.change_voice(voice_id)
    if silence is not None:
        silence.reconfigure(quiet)
    if setup.template_values:
        await conversations.set_template_variables(
            ctx, org_id=org_id, conversation_id=conversation_id, values=setup.template_values
        )
    return Settings(agent.id, current.input_format, current.output_format, setup, voice_id)


def settings_of(agent: Agent, started: codec.Configure, setup: Setup) -> Settings:
    """What a conversation that a `config` just started runs with."""
    return Settings(
        agent_id=agent.id,
        input_format=engine.AudioFormat.parse(started.input_format or agent.audio_format),
        output_format=engine.AudioFormat.parse(started.output_format or agent.audio_format),
        setup=setup,
        voice_id=started.voice_id or agent.voice_id,
    )


def _check_formats(event: codec.Configure, current: Settings) -> None:
    for name, given, held in (
        ("input_format", event.input_format, current.input_format),
        ("output_format", event.output_format, current.output_format),
    ):
        if given is not None and engine.AudioFormat.parse(given) is not held:
            raise ValidationFailed(param_errors={name: f"{FIXED} ({held.value})"})


def _check_kept(event: codec.Configure, setup: Setup, held: Setup) -> None:
    """What the conversation keeps, and where, stays as it went live."""
    differs = {
        "data_retention_policy": event.data_retention_policy is not None
        and setup.retention != held.retention,
        "external_storage_policy": not isinstance(event.external_storage_policy, Unset)
        and setup.storage_policy_id != held.storage_policy_id,
        "enable_redaction": event.enable_redaction is not None and setup.redact != held.redact,
    }
    refused = {name: FIXED for name, changed in differs.items() if changed}
    if refused:
        raise ValidationFailed(param_errors=refused)
