"""Builders that go through the services, as the product does; and `agent_record`, a plain
agent record for the rules that need no database."""

from __future__ import annotations

import dataclasses
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from parley.records import (
    OPERATOR,
    Agent,
    AgentSpec,
    Conversation,
    EndedBy,
    IssuedTool,
    Outcome,
    ProjectRef,
    ToolSpec,
    TurnTiming,
)
from parley.services import Context, agents, conversations, endings, orgs, tools
from parley.services.orgs import NewOrganization

AGENT_DEFAULTS: dict[str, Any] = {
    "voice_id": "us_female",
    "system_prompt": "Be brief.",
    "welcome_message": None,
    "language": "en",
    "audio_format": "pcm_16000",
    "phone_numbers": (),
}
"""The test agent's settings, made through the service or as a plain record."""


def agent_record(**fields: Any) -> Agent:
    """An agent record as the services read one, with no database: `support` in `main`,
    no welcome and no phone number, unless `fields` say otherwise."""
    at = datetime(2026, 12, 7, tzinfo=UTC)
    made = Agent(
        id="agent_" + "1" * 32,
        org_id="org_" + "1" * 32,
        project=ProjectRef(id="proj_" + "1" * 32, name="main"),
        name="support",
        **AGENT_DEFAULTS,
        disabled_at=None,
        created_at=at,
        updated_at=at,
    )
    return dataclasses.replace(made, **fields)


def unique_name(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


async def make_org(ctx: Context, name: str | None = None) -> NewOrganization:
    """Create an organization (with `main` and a first API key) through the service."""
    return await orgs.create_org(ctx, name=name or unique_name("org"))


async def make_agent(
    ctx: Context, org_id: str, *, name: str | None = None, tools: tuple[str, ...] = ()
) -> Agent:
    """Create an agent in `main` through the service."""
    spec = AgentSpec(
        name=name or unique_name("agent"),
        **AGENT_DEFAULTS,
        tools=tools,
    )
    return await agents.create_agent(ctx, org_id=org_id, project=None, spec=spec, actor=OPERATOR)


async def make_tool(ctx: Context, org_id: str, *, name: str | None = None) -> IssuedTool:
    """Create a webhook tool in `main` through the service."""
    spec = ToolSpec(
        name=name or unique_name("tool").replace("-", "_"),
        description="Looks things up.",
        type="custom_webhook",
        execution_mode="sync",
        parameters=[{"type": "string", "name": "q", "description": "", "is_required": True}],
        endpoint_url="https://tools.example.com/lookup",
    )
    return await tools.create_tool(ctx, org_id=org_id, project=None, spec=spec, actor=OPERATOR)


class FixedClock:
    """A clock whose wall time is always `moment` (monotonic time runs as usual)."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def time(self) -> float:
        return self.moment.timestamp()

    def monotonic(self) -> float:
        return time.monotonic()


async def make_conversation_at(
    ctx: Context,
    org_id: str,
    agent: str,
    at: datetime,
    *,
    ended_by: EndedBy | None = None,
    latencies_ms: tuple[int, ...] = (),
    turns: tuple[TurnTiming, ...] = (),
) -> Conversation:
    """Create a conversation at `at` through the services and, given `ended_by`, end it
    there, storing `latencies_ms` and `turns` as its socket would have measured them."""
    then = dataclasses.replace(ctx, clock=FixedClock(at))
    created = await conversations.create_conversation(
        then, org_id=org_id, agent=agent, project=None, conversation_id=None
    )
    if ended_by is not None:
        await endings.end_conversation(
            then,
            org_id=org_id,
            conversation_id=created.id,
            ending=endings.Ending(ended_by, endings.CloseCode.NORMAL, ""),
            measured=Outcome(latencies_ms=latencies_ms, turns=turns),
        )
    return await conversations.get_conversation(ctx, org_id=org_id, conversation_id=created.id)
