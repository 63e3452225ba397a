"""Conversations over REST (API.md section 5)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


async def test_create_conversation_pending_with_service_id(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)

    response = await tenant.client.post("/v1/conversations", json={"agent": agent["name"]})

    assert response.status_code == 201
    conversation = response.json()["conversation"]
    assert conversation["id"].startswith("conv_")
    assert conversation["status"] == "pending"
    assert conversation["agent"] == {"id": agent["id"], "name": agent["name"], "is_deleted": False}
    assert conversation["project"] == agent["project"]
    assert conversation["project"]["name"] == "main"
    assert conversation["items"] == []
    assert conversation["started_at"] is None
    assert conversation["ended_at"] is None


async def test_create_conversation_customer_id_unique_per_org(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    mine = await make_agent(tenant)
    theirs = await make_agent(other_tenant)
    first = await tenant.client.post(
        "/v1/conversations", json={"agent": mine["id"], "id": "order-1"}
    )
    again = await tenant.client.post(
        "/v1/conversations", json={"agent": mine["id"], "id": "order-1"}
    )
    elsewhere = await other_tenant.client.post(
        "/v1/conversations", json={"agent": theirs["id"], "id": "order-1"}
    )
    assert first.status_code == 201
    assert_error(again, 409, "conversation_exists")
    assert elsewhere.status_code == 201


async def test_create_conversation_disabled_agent_409(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
    response = await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})
    assert_error(response, 409, "agent_disabled")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"agent": "ghost"}, 404, "agent_not_found"),
        ({}, 400, "validation_error"),
        ({"agent": "x", "id": "has space"}, 400, "validation_error"),
        ({"agent": "x", "id": "a/b"}, 400, "validation_error"),
    ],
    ids=["unknown-agent", "no-agent", "space-in-id", "slash-in-id"],
)
async def test_create_conversation_invalid(
    tenant: Tenant, make_agent: MakeAgent, body: dict[str, Any], status: int, code: str
) -> None:
    await make_agent(tenant, name="x")
    assert_error(await tenant.client.post("/v1/conversations", json=body), status, code)


async def test_list_conversations_paged_and_filtered(tenant: Tenant, make_agent: MakeAgent) -> None:
    first = await make_agent(tenant)
    second = await make_agent(tenant)
    ids = []
    for agent in (first, second, first):
        made = await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})
        ids.append(made.json()["conversation"]["id"])

    page = (await tenant.client.get("/v1/conversations", params={"limit": 2})).json()
    rest = (
        await tenant.client.get("/v1/conversations", params={"cursor": page["next_cursor"]})
    ).json()
    by_agent = (
        await tenant.client.get("/v1/conversations", params={"agent": first["name"]})
    ).json()

    assert [c["id"] for c in page["conversations"] + rest["conversations"]] == ids
    assert rest["next_cursor"] is None
    assert [c["id"] for c in by_agent["conversations"]] == [ids[0], ids[2]]


async def test_list_conversations_project_filter_resolved_like_agents(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    """`?project=` takes a name or an ID; unknown is 404, another org's project ID 403."""
    project = (await tenant.client.post("/v1/projects", json={"name": "sales"})).json()["project"]
    in_sales = await make_agent(tenant, project="sales")
    in_main = await make_agent(tenant)
    for agent in (in_sales, in_main):
        await tenant.client.post("/v1/conversations", json={"agent": agent["id"]})

    async def agents_of(project_ref: str) -> list[str]:
        response = await tenant.client.get("/v1/conversations", params={"project": project_ref})
        assert response.status_code == 200, response.text
        return [c["agent"]["id"] for c in response.json()["conversations"]]

    assert await agents_of("sales") == [in_sales["id"]]
    assert await agents_of(project["id"]) == [in_sales["id"]]
    assert await agents_of("") == [in_sales["id"], in_main["id"]]  # empty: every project
    unknown = await tenant.client.get("/v1/conversations", params={"project": "nope"})
    assert_error(unknown, 404, "project_not_found")
    theirs = await other_tenant.client.get("/v1/conversations", params={"project": project["id"]})
    assert_error(theirs, 403, "forbidden")


async def test_end_conversation_idempotent(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post("/v1/conversations", json={"agent": agent["id"], "id": "e1"})

    assert (await tenant.client.post("/v1/conversations/e1/end")).json() == {"success": True}
    assert (await tenant.client.post("/v1/conversations/e1/end")).json() == {"success": True}
    ended = (await tenant.client.get("/v1/conversations/e1")).json()["conversation"]
    assert ended["status"] == "ended"
    assert ended["ended_at"].endswith("Z")


async def test_end_unknown_conversation_404(tenant: Tenant) -> None:
    assert_error(
        await tenant.client.post("/v1/conversations/none/end"), 404, "conversation_not_found"
    )


async def test_get_conversation_of_other_org_404(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(other_tenant)
    await other_tenant.client.post("/v1/conversations", json={"agent": agent["id"], "id": "theirs"})
    assert_error(await tenant.client.get("/v1/conversations/theirs"), 404, "conversation_not_found")
