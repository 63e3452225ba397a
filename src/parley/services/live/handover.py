"""A transfer carried out by a conversation's session (API.md section 15; the rules are
services/transfers.py's): the next agent set up on the running engine, or the call put
through to a number once the caller has heard the agent's last word.

A failed hand-off is told to the model as a system note, and the conversation goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from parley import engine
from parley.errors import ParleyError
from parley.records import Agent, Outcome
from parley.services import conversations, transfers
from parley.services.context import Context
from parley.services.live import codec
from parley.services.live.analysis import TurnAnalysis
from parley.services.live.setup import Setup
from parley.services.live.tools import ConversationTools

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NextAgent:
    """What the session keeps of the agent it now runs as."""

    project_id: str
    voice_id: str


async def switch_agent(
    ctx: Context,
    live: engine.ConversationEngine,
    tools: ConversationTools,
    *,
    org_id: str,
    conversation_id: str,
    agent: Agent,
    given_values: dict[str, str],
) -> NextAgent | None:
    """Go on with `agent`: its prompt, tools, voice, then its welcome; None if that failed
    (the model is told)."""
    try:
        frame = codec.Configure(agent=agent.id, template_variables=given_values)
        setup = await Setup.check(ctx, frame, agent)
        await transfers.to_agent(ctx, org_id=org_id, conversation_id=conversation_id, agent=agent)
    except ParleyError as error:
        log.info("transfer to agent %s failed: %s", agent.id, error.code)
        note = f"The transfer to {agent.name} failed ({error.message}). Tell the user."
        await live.generate_reply(system_message=note)
        return None
    tools.use(setup.tools, built_ins=setup.built_ins)
    await live.update_system_prompt(setup.system_prompt)
    await live.update_tools(tools.definitions())
    await live.change_voice(agent.voice_id)
    if setup.welcome_message:
        await live.say(setup.welcome_message)
    return NextAgent(project_id=agent.project.id, voice_id=agent.voice_id)


async def put_through(
    ctx: Context,
    live: engine.ConversationEngine,
    *,
    org_id: str,
    conversation_id: str,
    request: transfers.PhoneTransfer,
    voice_id: str,
) -> bool:
    """Have the carrier dial the number (the caller heard the last word: the caller's
    session waited for it); True once it is dialling, False if it could not be (the model is
    told)."""
    try:
        found = await conversations.get_conversation(
            ctx, org_id=org_id, conversation_id=conversation_id
        )
        await transfers.put_through(
            ctx,
            org_id=org_id,
            conversation_id=conversation_id,
            request=request,
            voice_id=voice_id,
            summary=summary_of([item.text for item in found.items if item.role == "user"]),
        )
    except ParleyError as error:
        log.info("transfer of %s not placed: %s", conversation_id, error.message)
        note = f"The transfer could not be placed ({error.message}). Tell the caller."
        await live.generate_reply(system_message=note)
        return False
    return True


async def stream_left(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    analysis: TurnAnalysis | None,
) -> None:
    """The stream stopped for the transfer: the conversation stays live (the carrier's
    callbacks end it or bring the caller back), with what this stream measured."""
    try:
        await transfers.stream_left(
            ctx,
            org_id=org_id,
            conversation_id=conversation_id,
            measured=analysis.outcome() if analysis else Outcome(),
        )
    except ParleyError:
        log.exception("could not store what call %s measured", conversation_id)


def summary_of(user_said: Sequence[str]) -> str:
    """A warm transfer's summary of the call: the caller's last words (a model-written one
    is the analysis of the conversation's, issue #40)."""
    said = [text for text in user_said if text]
    return f"The caller said: {said[-1]}" if said else ""
