"""The transfer tools as a resource (API.md section 15, services/tools.py rule 8): their
members, defaults and refusals, through the API and the official SDK's shapes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.types import Tenant

pytestmark = pytest.mark.anyio

PHONE = "built_in_transfer_to_phone_number"
AGENT = "built_in_transfer_to_agent"


async def create(tenant: Tenant, **body: Any) -> httpx.Response:
    return await tenant.client.post("/v1/tools", json={"name": "handoff", **body})


async def shown(tenant: Tenant, name: str = "handoff") -> dict[str, Any]:
    response = await tenant.client.get(f"/v1/tools/{name}")
    assert response.status_code == 200, response.text
    tool: dict[str, Any] = response.json()["tool"]
    return tool


def refused(response: httpx.Response, field: str, code: str = "validation_error") -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"]["code"] == code, body
    assert field in body.get("param_errors", {}), body
    message: str = body["param_errors"][field]
    return message


async def test_transfer_to_phone_number_defaults_of_the_sdk(tenant: Tenant) -> None:
    made = await create(tenant, type=PHONE, phone_number="+14155550100", dtmf="12w3")
    assert made.status_code == 201, made.text
    tool = await shown(tenant)
    assert {k: tool[k] for k in (
        "type", "phone_number", "dtmf", "dynamic_dtmf", "use_agent_phone_number",
        "keep_listening", "post_transfer_message", "on_transfer_no_answer", "detect_voicemail",
        "agents_to_transfer_to", "parameters", "execution_mode", "endpoint_url",
    )} == {
        "type": PHONE, "phone_number": "+14155550100", "dtmf": "12w3", "dynamic_dtmf": False,
        "use_agent_phone_number": False, "keep_listening": False, "post_transfer_message": None,
        "on_transfer_no_answer": "return_to_assistant", "detect_voicemail": False,
        "agents_to_transfer_to": None, "parameters": [], "execution_mode": "sync",
        "endpoint_url": None,
    }  # fmt: skip


async def test_transfer_to_phone_number_keep_listening_defaults_to_use_agent_phone_number(
    tenant: Tenant,
) -> None:
    made = await create(
        tenant, type=PHONE, use_agent_phone_number=True, post_transfer_message="A caller."
    )
    assert made.status_code == 201, made.text
    tool = await shown(tenant)
    assert (tool["phone_number"], tool["keep_listening"]) == (None, True)  # model gives it
    assert tool["post_transfer_message"] == "A caller."


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"use_agent_phone_number": True, "keep_listening": False}, "keep_listening", None),
        ({"detect_voicemail": True}, "detect_voicemail", "not_supported"),
        ({"post_transfer_message": "Hello"}, "post_transfer_message", None),
        ({"phone_number": "4155550100"}, "phone_number", None),
        ({"dtmf": "12a"}, "dtmf", None),
        ({"on_transfer_no_answer": "hang_up"}, "on_transfer_no_answer", None),
        ({"agents_to_transfer_to": ["billing"]}, "agents_to_transfer_to", None),
        ({"endpoint_url": "https://example.com/x"}, "endpoint_url", None),
        ({"parameters": [{"type": "string", "name": "x", "description": "x"}]}, "parameters", None),
        ({"execution_mode": "async"}, "execution_mode", None),
    ],
    ids=[
        "cold_with_agent_number", "detect_voicemail", "message_of_a_cold_transfer",
        "not_e164", "bad_dtmf", "unknown_no_answer", "agent_member", "endpoint", "parameters",
        "async",
    ],
)  # fmt: skip
async def test_transfer_to_phone_number_refusals(
    tenant: Tenant, body: dict[str, Any], field: str, code: str | None
) -> None:
    refused(await create(tenant, type=PHONE, **body), field, code or "validation_error")
    assert (await tenant.client.get("/v1/tools")).json()["tools"] == []


async def test_transfer_to_agent_needs_its_agents_and_takes_no_phone_member(
    tenant: Tenant,
) -> None:
    refused(await create(tenant, type=AGENT), "agents_to_transfer_to")
    refused(await create(tenant, type=AGENT, agents_to_transfer_to=[]), "agents_to_transfer_to")
    twice = await create(tenant, type=AGENT, agents_to_transfer_to=["billing", "billing"])
    refused(twice, "agents_to_transfer_to")
    phone = await create(tenant, type=AGENT, agents_to_transfer_to=["billing"], dtmf="1")
    refused(phone, "dtmf")
    made = await create(tenant, type=AGENT, agents_to_transfer_to=["billing", "sales"])
    assert made.status_code == 201, made.text
    tool = await shown(tenant)
    assert tool["agents_to_transfer_to"] == ["billing", "sales"]
    assert tool["keep_listening"] is None


async def test_transfer_members_refused_on_other_tool_types_and_patch_switches_type(
    tenant: Tenant,
) -> None:
    webhook = {"type": "custom_webhook", "endpoint_url": "https://tools.example.com/w"}
    refused(await create(tenant, **webhook, phone_number="+14155550100"), "phone_number")
    assert (await create(tenant, **webhook)).status_code == 201
    switched = await tenant.client.patch(
        "/v1/tools/handoff",
        json={"type": PHONE, "endpoint_url": None, "phone_number": "+14155550100"},
    )
    assert switched.status_code == 200, switched.text
    tool = await shown(tenant)
    assert (tool["type"], tool["endpoint_method"], tool["keep_listening"]) == (PHONE, None, False)
    back = await tenant.client.patch("/v1/tools/handoff", json={"type": "custom_websocket"})
    assert back.status_code == 200, back.text  # the transfer's defaults are dropped with it
    assert (await shown(tenant))["phone_number"] is None


async def test_agent_lists_a_transfer_tool_like_any_tool_of_its_project(tenant: Tenant) -> None:
    assert (await create(tenant, type=PHONE, phone_number="+14155550100")).status_code == 201
    made = await tenant.client.post("/v1/agents", json={"name": "front", "tools": ["handoff"]})
    assert made.status_code == 201, made.text
    assert made.json()["agent"]["tools"] == ["handoff"]
