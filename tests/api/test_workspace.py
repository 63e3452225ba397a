"""Projects' settings and the workspace (API.md section 17): the official SDK's calls,
unchanged, against the app in-process, and raw HTTP where the contract says more (the IP
allowlist from chosen client addresses, validation, the caps' counts)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic
from phonic.environment import PhonicEnvironment
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.records import WorkspacePatch
from parley.services import Context, conversations, endings, workspace
from parley.services.active_conversations import count_workspace

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

OFFICE = "203.0.113.5"
ELSEWHERE = "198.51.100.20"


def http_from(app: FastAPI, address: str, api_key: str) -> httpx.AsyncClient:
    """A client whose requests reach the app from `address` (the ASGI scope's client)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(address, 4321))
    return httpx.AsyncClient(
        transport=transport,
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {api_key}"},
    )


async def start(ctx: Context, org_id: str, agent: str) -> str:
    conversation, _ = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=True,
        agent=agent,
        project=None,
        end_user=None,
    )
    return conversation.id


# --- projects ---------------------------------------------------------------------------


async def test_sdk_projects_create_get_list_update_delete(
    sdk: AsyncPhonic, tenant: Tenant, make_agent: MakeAgent
) -> None:
    created = await sdk.projects.create(name="sales")
    assert created.id.startswith("proj_")
    assert created.name == "sales"
    agent = await make_agent(tenant, project_query="sales")
    assert (
        await sdk.projects.update(
            "sales", name="sales-eu", default_agent=agent["name"], max_active_conversations=3
        )
    ).success is True
    got = (await sdk.projects.get(created.id)).project
    assert (got.id, got.name, got.max_active_conversations) == (created.id, "sales-eu", 3)
    assert got.default_agent is not None
    assert (got.default_agent.id, got.default_agent.name) == (agent["id"], agent["name"])
    assert got.active_conversations == 0
    listed = (await sdk.projects.list()).projects
    assert [p.name for p in listed] == ["main", "sales-eu"]
    assert listed[0].default_agent is None
    assert listed[0].max_active_conversations is None
    await sdk.projects.update("sales-eu", default_agent=None, max_active_conversations=None)
    cleared = (await sdk.projects.get("sales-eu")).project
    assert (cleared.default_agent, cleared.max_active_conversations) == (None, None)
    await tenant.client.delete(f"/v1/agents/{agent['id']}")
    assert (await sdk.projects.delete("sales-eu")).success is True


async def test_project_create_answers_id_name_and_project(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/projects", json={"name": "ops"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"id", "name", "project"}
    assert body["project"] == {
        "id": body["id"],
        "name": "ops",
        "default_agent": None,
        "active_conversations": 0,
        "max_active_conversations": None,
        "created_at": body["project"]["created_at"],
    }


async def test_project_main_rename_refused_409(tenant: Tenant) -> None:
    response = await tenant.client.patch("/v1/projects/main", json={"name": "primary"})
    assert_error(response, 409, "project_protected")
    assert (await tenant.client.get("/v1/projects/main")).status_code == 200


async def test_project_rename_to_taken_name_409(tenant: Tenant) -> None:
    await tenant.client.post("/v1/projects", json={"name": "a"})
    await tenant.client.post("/v1/projects", json={"name": "b"})
    assert_error(await tenant.client.patch("/v1/projects/a", json={"name": "b"}), 409, "name_taken")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_active_conversations": 0}, "max_active_conversations"),
        ({"max_active_conversations": "3"}, "max_active_conversations"),
        ({"default_agent": "nobody"}, "default_agent"),
        ({"name": None}, "name"),
        ({"name": "Bad Name"}, "name"),
        ({"colour": "red"}, "colour"),
    ],
    ids=["cap-zero", "cap-string", "unknown-agent", "null-name", "bad-name", "unknown-member"],
)
async def test_project_update_invalid_400_names_the_field(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = await tenant.client.patch("/v1/projects/main", json=body)
    assert field in assert_error(response, 400, "validation_error")["param_errors"]


async def test_project_default_agent_of_another_project_400(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    theirs = await make_agent(tenant, project_query="other")
    response = await tenant.client.patch("/v1/projects/main", json={"default_agent": theirs["id"]})
    assert "default_agent" in assert_error(response, 400, "validation_error")["param_errors"]


async def test_project_default_agent_deleted_reads_null(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.patch("/v1/projects/main", json={"default_agent": agent["name"]})
    assert (await tenant.client.get("/v1/projects/main")).json()["project"]["default_agent"] == {
        "id": agent["id"],
        "name": agent["name"],
    }
    await tenant.client.delete(f"/v1/agents/{agent['id']}")
    assert (await tenant.client.get("/v1/projects/main")).json()["project"]["default_agent"] is None


# --- the workspace ----------------------------------------------------------------------


async def test_sdk_workspace_get_and_update(app: FastAPI, tenant: Tenant) -> None:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(OFFICE, 1234))
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        environment = PhonicEnvironment(base="http://testserver/v1", production="ws://testserver")
        sdk = AsyncPhonic(api_key=tenant.api_key, environment=environment, httpx_client=http)
        before = await sdk.workspace.get()
        assert (before.active_conversations, before.ip_allowlist) == (0, [])
        assert before.logo_url is None
        updated = await sdk.workspace.update(
            logo_url="https://cdn.example.com/logo.svg",
            invite_link_allowed_domains=["example.com"],
            ip_allowlist=["203.0.113.0/24", "2001:db8::/32", "192.0.2.7"],
        )
        assert updated.success is True
        after = await sdk.workspace.get()
    assert after.logo_url == "https://cdn.example.com/logo.svg"
    assert after.invite_link_allowed_domains == ["example.com"]
    assert after.ip_allowlist == ["203.0.113.0/24", "2001:db8::/32", "192.0.2.7"]
    raw = (await http_from(app, OFFICE, tenant.api_key).get("/v1/workspace")).json()
    assert raw == {
        "id": tenant.org.id,
        "name": tenant.org.name,
        "active_conversations": 0,
        "max_active_conversations": None,
        "ip_allowlist": ["203.0.113.0/24", "2001:db8::/32", "192.0.2.7"],
        "invite_link_allowed_domains": ["example.com"],
        "logo_url": "https://cdn.example.com/logo.svg",
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ip_allowlist": ["10.0.0.1/8"]}, "ip_allowlist[0]"),
        ({"ip_allowlist": ["127.0.0.1", "300.1.1.1"]}, "ip_allowlist[1]"),
        ({"ip_allowlist": ["127.0.0.1 "]}, "ip_allowlist[0]"),
        ({"ip_allowlist": ["localhost"]}, "ip_allowlist[0]"),
        ({"ip_allowlist": ["127.0.0.1/33"]}, "ip_allowlist[0]"),
        ({"ip_allowlist": [f"10.{i // 256}.{i % 256}.0/24" for i in range(101)]}, "ip_allowlist"),
        ({"ip_allowlist": None}, "ip_allowlist"),
        ({"logo_url": "http://cdn.example.com/logo.png"}, "logo_url"),
        ({"logo_url": "https://cdn.example.com/logo.gif"}, "logo_url"),
        ({"invite_link_allowed_domains": ["Example.COM"]}, "invite_link_allowed_domains[0]"),
        ({"max_active_conversations": 0}, "max_active_conversations"),
        ({"max_active_conversations": True}, "max_active_conversations"),
        ({"name": "Not A Name"}, "name"),
    ],
    ids=[
        "host-bits",
        "bad-octet",
        "space",
        "hostname",
        "prefix-too-long",
        "too-many",
        "null-list",
        "logo-http",
        "logo-gif",
        "domain-upper",
        "cap-zero",
        "cap-bool",
        "bad-name",
    ],
)
async def test_workspace_update_invalid_400_names_the_field_and_changes_nothing(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = await tenant.client.patch("/v1/workspace", json=body)
    assert field in assert_error(response, 400, "validation_error")["param_errors"]
    after = (await tenant.client.get("/v1/workspace")).json()
    assert (after["ip_allowlist"], after["logo_url"]) == ([], None)


async def test_workspace_ip_allowlist_without_the_caller_would_lock_out_400(
    app: FastAPI, tenant: Tenant
) -> None:
    async with http_from(app, ELSEWHERE, tenant.api_key) as http:
        response = await http.patch("/v1/workspace", json={"ip_allowlist": ["203.0.113.0/24"]})
        assert_error(response, 400, "would_lock_out")
        assert (await http.get("/v1/workspace")).json()["ip_allowlist"] == []
        assert (await http.patch("/v1/workspace", json={"ip_allowlist": []})).status_code == 200


async def test_ip_allowlist_refuses_api_key_and_session_token_from_other_addresses_403(
    app: FastAPI, tenant: Tenant
) -> None:
    async with http_from(app, OFFICE, tenant.api_key) as office:
        token = (await office.post("/v1/auth/session_token", json={})).json()["session_token"]
        allowed = await office.patch("/v1/workspace", json={"ip_allowlist": ["203.0.113.0/24"]})
        assert allowed.status_code == 200, allowed.text
        assert (await office.get("/v1/agents")).status_code == 200
    async with http_from(app, ELSEWHERE, tenant.api_key) as elsewhere:
        assert_error(await elsewhere.get("/v1/agents"), 403, "ip_not_allowed")
        assert_error(await elsewhere.get("/v1/workspace"), 403, "ip_not_allowed")
    async with http_from(app, ELSEWHERE, token) as with_token:
        assert_error(await with_token.get("/v1/conversations"), 403, "ip_not_allowed")
    async with http_from(app, "::ffff:203.0.113.9", token) as mapped:
        assert (await mapped.get("/v1/conversations")).status_code == 200


async def test_ip_allowlist_change_applies_to_the_next_request(
    app: FastAPI, ctx: Context, tenant: Tenant
) -> None:
    async with http_from(app, ELSEWHERE, tenant.api_key) as elsewhere:
        assert (await elsewhere.get("/v1/agents")).status_code == 200  # the allowlist cached
        patch = WorkspacePatch(ip_allowlist=(OFFICE,))
        await workspace.update_workspace(
            ctx, org_id=tenant.org.id, patch=patch, actor=_actor(), client=OFFICE
        )
        assert_error(await elsewhere.get("/v1/agents"), 403, "ip_not_allowed")


def _actor() -> Any:
    from parley.records import OPERATOR

    return OPERATOR


# --- the counts of active conversations ---------------------------------------------------


async def test_active_conversations_counted_in_project_and_workspace_until_ended(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    first = await start(ctx, tenant.org.id, agent["name"])
    await start(ctx, tenant.org.id, agent["name"])
    main = (await tenant.client.get("/v1/projects/main")).json()["project"]
    assert main["active_conversations"] == 2
    assert (await tenant.client.get("/v1/workspace")).json()["active_conversations"] == 2
    await endings.end_conversation(
        ctx, org_id=tenant.org.id, conversation_id=first, ending=endings.API
    )
    assert await count_workspace(ctx, org_id=tenant.org.id) == 1
    listed = (await tenant.client.get("/v1/projects")).json()["projects"]
    assert [p["active_conversations"] for p in listed] == [1]


async def test_active_conversation_past_project_cap_refused_too_many(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    from parley.errors import TooManyActiveConversations

    agent = await make_agent(tenant)
    await tenant.client.patch("/v1/projects/main", json={"max_active_conversations": 1})
    first = await start(ctx, tenant.org.id, agent["name"])
    with pytest.raises(TooManyActiveConversations):
        await start(ctx, tenant.org.id, agent["name"])
    assert len((await tenant.client.get("/v1/conversations")).json()["conversations"]) == 1
    await endings.end_conversation(
        ctx, org_id=tenant.org.id, conversation_id=first, ending=endings.API
    )
    await start(ctx, tenant.org.id, agent["name"])


async def test_active_conversation_past_workspace_cap_refused_in_any_project(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    from parley.errors import TooManyActiveConversations

    await tenant.client.post("/v1/projects", json={"name": "second"})
    here = await make_agent(tenant)
    there = await make_agent(tenant, project_query="second")
    patched = await tenant.client.patch("/v1/workspace", json={"max_active_conversations": 1})
    assert patched.status_code == 200, patched.text
    await start(ctx, tenant.org.id, here["name"])
    with pytest.raises(TooManyActiveConversations):
        await conversations.start_live(
            ctx,
            org_id=tenant.org.id,
            conversation_id=None,
            create_if_missing=True,
            agent=there["id"],
            project=None,
            end_user=None,
        )
