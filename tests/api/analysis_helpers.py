"""Builders shared by the tests of the work after a call (API.md section 16): spoken
conversations, schemas and prompts, and an app that asks the scripted chat server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from tests.factories import make_org
from tests.types import Tenant

from parley.app import create_app
from parley.config import Settings
from parley.records import ToolCall
from parley.services import Context, conversations, endings

APPOINTMENT = {
    "name": "Appointment details",
    "prompt": "Dates as `9 Apr 2025`.",
    "fields": [
        {"name": "Date", "type": "string", "description": "The date of the appointment"},
        {"name": "Guests", "type": "int"},
        {"name": "Copay", "type": "float", "description": "In dollars"},
        {"name": "Confirmed as booked", "type": "bool"},
    ],
}
LINES = (
    ("user", "Hi, a table for four on 9 April please."),
    ("assistant", "Booked: four guests on 9 April, a copay of 12.50 dollars."),
)


async def spoken(
    ctx: Context,
    org_id: str,
    agent: str,
    lines: Sequence[tuple[str, str]] = LINES,
    *,
    ended: bool = True,
    tool_calls: Sequence[ToolCall] = (),
) -> str:
    """A conversation of `agent` (in `main`): live, `lines` said, ended unless told not to;
    `tool_calls` go on the last line."""
    conversation, _ = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=True,
        agent=agent,
        project=None,
        end_user=None,
    )
    for index, (role, text) in enumerate(lines):
        last = index == len(lines) - 1
        await conversations.add_item(
            ctx,
            org_id=org_id,
            conversation_id=conversation.id,
            role=role,
            text=text,
            tool_calls=tool_calls if last else (),
        )
    if ended:
        await endings.end_conversation(
            ctx, org_id=org_id, conversation_id=conversation.id, ending=endings.CLIENT_CLOSED
        )
    return conversation.id


async def create_schema(tenant: Tenant, body: dict[str, Any] | None = None) -> dict[str, Any]:
    response = await tenant.client.post("/v1/extraction_schemas", json=body or APPOINTMENT)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


async def create_prompt(
    tenant: Tenant, name: str = "used_chocolate", prompt: str = "The agent said chocolate."
) -> dict[str, Any]:
    response = await tenant.client.post(
        "/v1/projects/main/conversation_eval_prompts", json={"name": name, "prompt": prompt}
    )
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


@asynccontextmanager
async def tenant_of(settings: Settings) -> AsyncIterator[tuple[FastAPI, Tenant]]:
    """An app of its own (its lifespan entered) and a new organization's client on it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        made = await make_org(app.state.context)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://testserver",
            headers={"Authorization": f"Bearer {made.api_key.secret}"},
        ) as http:
            yield app, Tenant(org=made.org, api_key=made.api_key.secret, client=http)
