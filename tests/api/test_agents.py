"""Agents over HTTP: every endpoint of API.md section 4 and the spec's disable operation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio

UNKNOWN_AGENT_ID = "agent_" + "0" * 32


# --- spec section 4.1: disable ----------------------------------------------------------


async def test_disable_agent_by_name_succeeds(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)

    response = await tenant.client.post(f"/v1/agents/{agent['name']}/disable")

    assert response.status_code == 200
    assert response.json() == {"success": True}
    fetched = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert fetched["is_disabled"] is True
    assert fetched["disabled_at"] is not None


async def test_disable_agent_by_id_succeeds(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)

    response = await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    assert response.json() == {"success": True}
    assert (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]["is_disabled"]


async def test_disable_agent_by_name_uses_project_query(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "sales"})
    in_main = await make_agent(tenant, name="bot")
    in_sales = await make_agent(tenant, name="bot", project="sales")

    response = await tenant.client.post("/v1/agents/bot/disable", params={"project": "sales"})

    assert response.json() == {"success": True}
    assert (await tenant.client.get(f"/v1/agents/{in_sales['id']}")).json()["agent"]["is_disabled"]
    main_bot = (await tenant.client.get(f"/v1/agents/{in_main['id']}")).json()["agent"]
    assert main_bot["is_disabled"] is False


async def test_disable_agent_by_id_ignores_project_query(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)

    response = await tenant.client.post(
        f"/v1/agents/{agent['id']}/disable", params={"project": "no-such-project"}
    )

    assert response.json() == {"success": True}


async def test_disable_agent_name_in_default_project_only(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "sales"})
    await make_agent(tenant, name="only-in-sales", project="sales")

    response = await tenant.client.post("/v1/agents/only-in-sales/disable")

    assert_error(response, 404, "agent_not_found")


async def test_disable_agent_unknown_name_404(tenant: Tenant) -> None:
    assert_error(await tenant.client.post("/v1/agents/nobody/disable"), 404, "agent_not_found")


async def test_disable_agent_unknown_id_404(tenant: Tenant) -> None:
    response = await tenant.client.post(f"/v1/agents/{UNKNOWN_AGENT_ID}/disable")
    assert_error(response, 404, "agent_not_found")


async def test_disable_agent_unknown_project_404(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.post(
        f"/v1/agents/{agent['name']}/disable", params={"project": "nowhere"}
    )
    assert_error(response, 404, "agent_not_found")


async def test_disable_agent_of_other_org_by_id_403(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant)

    response = await tenant.client.post(f"/v1/agents/{theirs['id']}/disable")

    assert_error(response, 403, "forbidden")
    still = (await other_tenant.client.get(f"/v1/agents/{theirs['id']}")).json()["agent"]
    assert still["is_disabled"] is False


async def test_disable_agent_of_other_org_by_name_404(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant)
    response = await tenant.client.post(f"/v1/agents/{theirs['name']}/disable")
    assert_error(response, 404, "agent_not_found")


async def test_disable_agent_without_api_key_401(
    client: httpx.AsyncClient, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)

    response = await client.post(f"/v1/agents/{agent['id']}/disable")

    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer parley_sk_" + "A" * 43,
        "Bearer not-a-key",
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "parley_sk_" + "A" * 43,
    ],
    ids=["unknown-key", "garbage", "basic-scheme", "no-token", "empty-token", "no-scheme"],
)
async def test_disable_agent_with_bad_credential_401(
    client: httpx.AsyncClient, tenant: Tenant, make_agent: MakeAgent, authorization: str
) -> None:
    agent = await make_agent(tenant)

    response = await client.post(
        f"/v1/agents/{agent['id']}/disable", headers={"Authorization": authorization}
    )

    body = assert_error(response, 401, "unauthorized")
    assert body["error"]["message"] == "Missing or invalid credential."


async def test_disable_agent_scheme_is_case_insensitive(
    client: httpx.AsyncClient, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    response = await client.post(
        f"/v1/agents/{agent['id']}/disable", headers={"Authorization": f"bEaReR {tenant.api_key}"}
    )
    assert response.json() == {"success": True}


async def test_disable_agent_two_credentials_400(
    client: httpx.AsyncClient, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    headers = [("Authorization", f"Bearer {tenant.api_key}")] * 2
    response = await client.post(f"/v1/agents/{agent['id']}/disable", headers=headers)
    assert_error(response, 400, "multiple_credentials")


async def test_disable_agent_already_disabled_succeeds_again(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
    first = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]

    response = await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    assert response.json() == {"success": True}
    again = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert again["disabled_at"] == first["disabled_at"]


# --- spec section 3: rules of a disabled agent ----------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"name": "renamed"},
        {"system_prompt": "new"},
        {"welcome_message": None},
        {"voice_id": "us_male"},
        {"audio_format": "mulaw_8000"},
        {"phone_numbers": ["+14155550199"]},
        {"phone_numbers": []},
    ],
    ids=["name", "prompt", "welcome", "voice", "format", "assign-number", "clear-numbers"],
)
async def test_update_disabled_agent_409_agent_disabled(
    tenant: Tenant, make_agent: MakeAgent, change: dict[str, Any]
) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550100"], welcome_message="hi")
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    response = await tenant.client.patch(f"/v1/agents/{agent['id']}", json=change)

    assert_error(response, 409, "agent_disabled")
    unchanged = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert {k: unchanged[k] for k in change} == {k: agent[k] for k in change}


async def test_release_all_phone_numbers_of_disabled_agent_succeeds(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550101", "+14155550102"])
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    response = await tenant.client.post(f"/v1/agents/{agent['id']}/phone_numbers/release")

    assert response.status_code == 200
    released = response.json()["agent"]
    assert released["phone_numbers"] == []
    assert released["is_disabled"] is True


async def test_release_some_phone_numbers_of_disabled_agent_succeeds(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550103", "+14155550104"])
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    response = await tenant.client.post(
        f"/v1/agents/{agent['id']}/phone_numbers/release",
        json={"phone_numbers": ["+14155550103"]},
    )

    assert response.json()["agent"]["phone_numbers"] == ["+14155550104"]


async def test_release_phone_numbers_null_400_not_all(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    """Only an omitted `phone_numbers` releases every number; an explicit null is refused."""
    agent = await make_agent(tenant, phone_numbers=["+14155550190"])
    response = await tenant.client.post(
        f"/v1/agents/{agent['id']}/phone_numbers/release", json={"phone_numbers": None}
    )
    body = assert_error(response, 400, "validation_error")
    assert set(body["param_errors"]) == {"phone_numbers"}
    kept = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert kept["phone_numbers"] == ["+14155550190"]


async def test_release_phone_number_not_assigned_400(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550105"])
    response = await tenant.client.post(
        f"/v1/agents/{agent['id']}/phone_numbers/release",
        json={"phone_numbers": ["+14155550999"]},
    )
    body = assert_error(response, 400, "validation_error")
    assert "phone_numbers" in body["param_errors"]


async def test_released_number_can_be_assigned_to_another_agent(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    first = await make_agent(tenant, phone_numbers=["+14155550106"])
    second = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{first['id']}/disable")
    await tenant.client.post(f"/v1/agents/{first['id']}/phone_numbers/release")

    response = await tenant.client.patch(
        f"/v1/agents/{second['id']}", json={"phone_numbers": ["+14155550106"]}
    )

    assert response.json()["agent"]["phone_numbers"] == ["+14155550106"]


async def test_enable_agent_allows_updates_again(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    enabled = await tenant.client.post(f"/v1/agents/{agent['id']}/enable")
    patched = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"system_prompt": "ok"})

    assert enabled.json() == {"success": True}
    assert patched.json()["agent"]["system_prompt"] == "ok"
    assert patched.json()["agent"]["is_disabled"] is False
    assert patched.json()["agent"]["disabled_at"] is None


async def test_enable_agent_already_enabled_succeeds_again(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.post(f"/v1/agents/{agent['id']}/enable")
    assert response.json() == {"success": True}


# --- create ---------------------------------------------------------------------------


async def test_create_agent_returns_full_record(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents",
        json={"name": "support", "system_prompt": "Be brief.", "phone_numbers": ["+442071838750"]},
    )

    assert response.status_code == 201
    agent = response.json()["agent"]
    assert agent["id"].startswith("agent_")
    assert agent["name"] == "support"
    assert agent["project"]["name"] == "main"
    assert agent["project"]["id"].startswith("proj_")
    assert agent["is_disabled"] is False
    assert agent["disabled_at"] is None
    assert agent["phone_numbers"] == ["+442071838750"]
    assert agent["system_prompt"] == "Be brief."
    assert agent["welcome_message"] is None
    assert agent["language"] == "en"
    assert agent["audio_format"] == "pcm_16000"
    assert agent["created_at"].endswith("Z")
    assert agent["updated_at"] == agent["created_at"]


async def test_create_agent_name_taken_409(tenant: Tenant, make_agent: MakeAgent) -> None:
    await make_agent(tenant, name="dup")
    response = await tenant.client.post("/v1/agents", json={"name": "dup"})
    assert_error(response, 409, "name_taken")


async def test_create_agent_same_name_in_other_project_succeeds(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await tenant.client.post("/v1/projects", json={"name": "other"})
    await make_agent(tenant, name="same")
    again = await tenant.client.post("/v1/agents", json={"name": "same", "project": "other"})
    assert again.status_code == 201
    assert again.json()["agent"]["project"]["name"] == "other"


async def test_create_agent_same_name_in_other_org_succeeds(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, name="shared-name")
    response = await other_tenant.client.post("/v1/agents", json={"name": "shared-name"})
    assert response.status_code == 201


async def test_create_agent_in_project_by_query(tenant: Tenant) -> None:
    await tenant.client.post("/v1/projects", json={"name": "q"})
    response = await tenant.client.post("/v1/agents", json={"name": "a"}, params={"project": "q"})
    assert response.json()["agent"]["project"]["name"] == "q"


async def test_create_agent_unknown_project_404(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "a", "project": "nope"})
    assert_error(response, 404, "project_not_found")


async def test_create_agent_project_body_and_query_differ_400(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents", json={"name": "a", "project": "main"}, params={"project": "other"}
    )
    assert_error(response, 400, "validation_error")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "Upper"}, "name"),
        ({"name": "-dash-first"}, "name"),
        ({"name": "a" * 65}, "name"),
        ({"name": "agent_" + "a" * 32}, "name"),
        ({"name": "conv_" + "b" * 32}, "name"),
        ({"name": 5}, "name"),
        ({"name": "ok", "audio_format": "mp3"}, "audio_format"),
        ({"name": "ok", "language": "en-US"}, "language"),  # "xx": unsupported_language
        ({"name": "ok", "phone_numbers": ["555-1234"]}, "phone_numbers.0"),
        ({"name": "ok", "phone_numbers": ["+14155550123", "+14155550123"]}, "phone_numbers"),
        ({"name": "ok", "phone_numbers": "+14155550123"}, "phone_numbers"),
        ({"name": "ok", "voice_id": ""}, "voice_id"),
        ({"name": "ok", "system_prompt": "x" * 20_001}, "system_prompt"),
        ({"name": "ok", "is_disabled": True}, "is_disabled"),
        ({"name": "ok", "id": "agent_" + "c" * 32}, "id"),
    ],
    ids=[
        "missing-name",
        "empty-name",
        "uppercase",
        "dash-first",
        "too-long",
        "agent-id-shape",
        "other-id-shape",
        "name-not-string",
        "bad-format",
        "bad-language",
        "bad-e164",
        "repeated-number",
        "numbers-not-list",
        "empty-voice",
        "prompt-too-long",
        "read-only-field",
        "unknown-field",
    ],
)
async def test_create_agent_invalid_body_400(
    tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = await tenant.client.post("/v1/agents", json=body)
    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert field in errors


async def test_create_agent_phone_number_taken_409(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, phone_numbers=["+14155550107"])
    response = await other_tenant.client.post(
        "/v1/agents", json={"name": "x", "phone_numbers": ["+14155550107"]}
    )
    assert_error(response, 409, "phone_number_taken")


# --- get and list ---------------------------------------------------------------------


async def test_get_agent_by_name_and_by_id_agree(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    by_name = await tenant.client.get(f"/v1/agents/{agent['name']}")
    by_id = await tenant.client.get(f"/v1/agents/{agent['id']}")
    assert by_name.json() == by_id.json() == {"agent": agent}


async def test_get_agent_of_other_org_by_id_403(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant)
    assert_error(await tenant.client.get(f"/v1/agents/{theirs['id']}"), 403, "forbidden")


async def test_list_agents_pages_with_cursor(tenant: Tenant, make_agent: MakeAgent) -> None:
    created = [(await make_agent(tenant))["id"] for _ in range(5)]

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        body = (await tenant.client.get("/v1/agents", params=params)).json()
        seen.extend(a["id"] for a in body["agents"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break

    assert seen == created
    assert pages == 3


async def test_list_agents_only_own_org(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    mine = await make_agent(tenant)
    await make_agent(other_tenant)
    body = (await tenant.client.get("/v1/agents")).json()
    assert [a["id"] for a in body["agents"]] == [mine["id"]]


async def test_list_agents_filtered_by_project(tenant: Tenant, make_agent: MakeAgent) -> None:
    await tenant.client.post("/v1/projects", json={"name": "p2"})
    await make_agent(tenant)
    in_p2 = await make_agent(tenant, project="p2")
    body = (await tenant.client.get("/v1/agents", params={"project": "p2"})).json()
    assert [a["id"] for a in body["agents"]] == [in_p2["id"]]
    everything = (await tenant.client.get("/v1/agents")).json()["agents"]
    assert len(everything) == 2
    empty = await tenant.client.get("/v1/agents", params={"project": ""})
    assert [a["id"] for a in empty.json()["agents"]] == [a["id"] for a in everything]


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": 0}, "validation_error"),
        ({"limit": 101}, "validation_error"),
        ({"limit": "many"}, "validation_error"),
        ({"cursor": "!!!"}, "invalid_cursor"),
        ({"cursor": "e30"}, "invalid_cursor"),
    ],
    ids=["limit-zero", "limit-over-100", "limit-not-int", "cursor-garbage", "cursor-not-ours"],
)
async def test_list_agents_bad_paging_400(
    tenant: Tenant, params: dict[str, Any], code: str
) -> None:
    response = await tenant.client.get("/v1/agents", params=params)
    assert_error(response, 400, code)


# --- update ---------------------------------------------------------------------------


async def test_update_agent_changes_only_given_fields(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, system_prompt="old", welcome_message="hello")

    response = await tenant.client.patch(
        f"/v1/agents/{agent['name']}", json={"system_prompt": "new", "welcome_message": None}
    )

    updated = response.json()["agent"]
    assert updated["system_prompt"] == "new"
    assert updated["welcome_message"] is None
    assert updated["name"] == agent["name"]
    assert updated["voice_id"] == agent["voice_id"]
    assert updated["updated_at"] >= agent["updated_at"]


async def test_update_agent_rename_to_taken_name_409(tenant: Tenant, make_agent: MakeAgent) -> None:
    await make_agent(tenant, name="taken")
    agent = await make_agent(tenant)
    response = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"name": "taken"})
    assert_error(response, 409, "name_taken")


async def test_update_agent_rename_then_found_by_new_name(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"name": "fresh"})
    assert (await tenant.client.get("/v1/agents/fresh")).json()["agent"]["id"] == agent["id"]
    assert_error(await tenant.client.get(f"/v1/agents/{agent['name']}"), 404, "agent_not_found")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": None}, "name"),
        ({"system_prompt": None}, "system_prompt"),
        ({"project": "other"}, "project"),
        ({"phone_numbers": ["12"]}, "phone_numbers.0"),
        ({"language": 1}, "language"),
    ],
    ids=["null-name", "null-prompt", "move-project", "bad-number", "bad-language"],
)
async def test_update_agent_invalid_body_400(
    tenant: Tenant, make_agent: MakeAgent, body: dict[str, Any], field: str
) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.patch(f"/v1/agents/{agent['id']}", json=body)
    assert field in assert_error(response, 400, "validation_error")["param_errors"]


async def test_update_agent_number_of_other_agent_409(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, phone_numbers=["+14155550108"])
    agent = await make_agent(tenant)
    response = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"phone_numbers": ["+14155550108"]}
    )
    assert_error(response, 409, "phone_number_taken")


async def test_update_agent_of_other_org_403(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant)
    response = await tenant.client.patch(f"/v1/agents/{theirs['id']}", json={"name": "mine"})
    assert_error(response, 403, "forbidden")


async def test_update_unknown_agent_404(tenant: Tenant) -> None:
    response = await tenant.client.patch("/v1/agents/ghost", json={"system_prompt": "x"})
    assert_error(response, 404, "agent_not_found")


# --- delete, enable, release across organizations -------------------------------------


async def test_delete_agent_then_404(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550109"])

    response = await tenant.client.delete(f"/v1/agents/{agent['id']}")

    assert response.json() == {"success": True}
    assert_error(await tenant.client.get(f"/v1/agents/{agent['id']}"), 404, "agent_not_found")
    reuse = await tenant.client.post(
        "/v1/agents", json={"name": agent["name"], "phone_numbers": ["+14155550109"]}
    )
    assert reuse.status_code == 201


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("DELETE", ""), ("POST", "/enable"), ("POST", "/phone_numbers/release")],
    ids=["delete", "enable", "release"],
)
async def test_agent_operation_on_other_org_403(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent, method: str, suffix: str
) -> None:
    theirs = await make_agent(other_tenant, phone_numbers=["+14155550110"])
    response = await tenant.client.request(method, f"/v1/agents/{theirs['id']}{suffix}")
    assert_error(response, 403, "forbidden")
    unchanged = (await other_tenant.client.get(f"/v1/agents/{theirs['id']}")).json()["agent"]
    assert unchanged == theirs


async def test_revoked_api_key_401(tenant: Tenant, client: httpx.AsyncClient) -> None:
    created = (await tenant.client.post("/v1/api_keys", json={"name": "temp"})).json()
    headers = {"Authorization": f"Bearer {created['secret']}"}
    assert (await client.get("/v1/agents", headers=headers)).status_code == 200

    await tenant.client.delete(f"/v1/api_keys/{created['id']}")

    assert_error(await client.get("/v1/agents", headers=headers), 401, "unauthorized")
