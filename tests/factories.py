"""Builders that go through the services, as the product does."""

from __future__ import annotations

import secrets

from parley.records import OPERATOR, Agent, AgentSpec, IssuedTool, ToolSpec
from parley.services import Context, agents, orgs, tools
from parley.services.orgs import NewOrganization


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
        voice_id="us_female",
        system_prompt="Be brief.",
        welcome_message=None,
        language="en",
        audio_format="pcm_16000",
        phone_numbers=(),
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
