"""`GET /v1/audit_events`: every change, with its actor, in the same transaction."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.jwt import generate_key_pair
from parley.services import Context, audit

pytestmark = pytest.mark.anyio


async def events(tenant: Tenant, **params: Any) -> list[dict[str, Any]]:
    response = await tenant.client.get("/v1/audit_events", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["audit_events"]
    return found


async def first_key_id(tenant: Tenant) -> str:
    response = await tenant.client.get("/v1/api_keys")
    key_id: str = response.json()["api_keys"][0]["id"]
    return key_id


async def test_audit_events_record_every_change_with_actor(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    api = tenant.client
    agent = await make_agent(tenant, phone_numbers=["+14155550100"])
    path = f"/v1/agents/{agent['id']}"
    assert (await api.patch(path, json={"system_prompt": "Be brief."})).status_code == 200
    assert (await api.post(f"{path}/disable")).status_code == 200
    assert (await api.post(f"{path}/enable")).status_code == 200
    assert (await api.post(f"{path}/phone_numbers/release")).status_code == 200
    key = (await api.post("/v1/api_keys", json={"name": "ci"})).json()
    assert (await api.delete(f"/v1/api_keys/{key['id']}")).status_code == 200
    token = (await api.post("/v1/auth/session_token")).json()
    assert (await api.delete(f"/v1/auth/session_token/{token['id']}")).status_code == 200
    pair = generate_key_pair("EdDSA")
    jwt_body = {"issuers": ["https://audit.example"], "public_keys": pair.jwks["keys"]}
    assert (await api.put("/v1/auth/jwt", json=jwt_body)).status_code == 200
    assert (await api.post("/v1/auth/jwt/refresh")).status_code == 200
    conversation = (await api.post("/v1/conversations", json={"agent": agent["id"]})).json()
    conversation_id = conversation["conversation"]["id"]
    ended = await api.post(
        f"/v1/conversations/{conversation_id}/end", headers={"X-Request-ID": "req-end-1"}
    )
    assert ended.status_code == 200
    assert (await api.delete(path)).status_code == 200

    found = list(reversed(await events(tenant)))

    assert [(e["action"], e["target"]) for e in found] == [
        ("org.create", tenant.org.id),
        ("api_key.create", await first_key_id(tenant)),
        ("agent.create", agent["id"]),
        ("agent.update", agent["id"]),
        ("agent.disable", agent["id"]),
        ("agent.enable", agent["id"]),
        ("agent.release_numbers", agent["id"]),
        ("api_key.create", key["id"]),
        ("api_key.revoke", key["id"]),
        ("session_token.create", token["id"]),
        ("session_token.revoke", token["id"]),
        ("jwt.update", "jwt_settings"),
        ("jwt.refresh", "jwt_settings"),
        ("conversation.end", conversation_id),
        ("agent.delete", agent["id"]),
    ]
    key_id = await first_key_id(tenant)
    assert {(e["actor"]["kind"], e["actor"]["id"]) for e in found[2:]} == {("api_key", key_id)}
    assert found[0]["actor"] == {"kind": "operator", "id": None}
    assert found[3]["details"] == {"name": agent["name"], "fields": ["system_prompt"]}
    assert found[6]["details"]["phone_numbers"] == ["+14155550100"]
    assert found[13]["request_id"] == "req-end-1"
    assert all(e["client"] == "127.0.0.1" for e in found[2:])
    assert [e["seq"] for e in found] == list(range(1, len(found) + 1))


async def test_audit_events_never_hold_a_secret(tenant: Tenant) -> None:
    created = (await tenant.client.post("/v1/api_keys", json={"name": "s"})).json()
    token = (await tenant.client.post("/v1/auth/session_token")).json()

    text = (await tenant.client.get("/v1/audit_events")).text

    assert created["secret"] not in text
    assert token["session_token"] not in text
    assert tenant.api_key not in text


async def test_audit_events_request_id_generated_when_absent(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/api_keys", json={"name": "r"})

    assert response.headers["x-request-id"]
    [newest] = await events(tenant, limit=1)
    assert newest["request_id"] == response.headers["x-request-id"]


async def test_audit_events_refused_change_leaves_no_event(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")

    refused = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={"voice_id": "x"})

    assert_error(refused, 409, "agent_disabled")
    assert await events(tenant, action="agent.update") == []


async def test_audit_events_filter_by_action_and_target(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    first = await make_agent(tenant)
    second = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{first['id']}/disable")

    by_action = await events(tenant, action="agent.create")
    by_target = await events(tenant, target=first["id"])

    assert [e["target"] for e in by_action] == [second["id"], first["id"]]
    assert [e["action"] for e in by_target] == ["agent.disable", "agent.create"]


async def test_audit_events_paginate_newest_first(tenant: Tenant) -> None:
    for n in range(5):
        await tenant.client.post("/v1/api_keys", json={"name": f"p{n}"})

    first = (await tenant.client.get("/v1/audit_events", params={"limit": 3})).json()
    rest = await events(tenant, limit=3, cursor=first["next_cursor"])

    seqs = [e["seq"] for e in first["audit_events"]] + [e["seq"] for e in rest]
    assert seqs == [7, 6, 5, 4, 3, 2]


async def test_audit_events_bad_cursor_is_400_invalid_cursor(tenant: Tenant) -> None:
    """Issue #9: a cursor the service did not issue is 400 `invalid_cursor`, as on every list."""
    for cursor in ("nope", "WzEsMl0", "e30", "YXVkaXQ6eA"):  # garbage, [1,2], {}, "audit:x"
        response = await tenant.client.get("/v1/audit_events", params={"cursor": cursor})
        assert_error(response, 400, "invalid_cursor")


async def test_audit_events_of_other_org_not_shown(tenant: Tenant, other_tenant: Tenant) -> None:
    await other_tenant.client.post("/v1/api_keys", json={"name": "theirs"})

    mine = await events(tenant)

    assert {e["target"] for e in mine}.isdisjoint({other_tenant.org.id})
    assert [e["action"] for e in mine] == ["api_key.create", "org.create"]


async def test_audit_events_need_api_key_403(tenant: Tenant) -> None:
    token = (await tenant.client.post("/v1/auth/session_token")).json()["session_token"]
    response = await tenant.client.get(
        "/v1/audit_events", headers={"Authorization": f"Bearer {token}"}
    )
    assert_error(response, 403, "insufficient_scope")


async def test_audit_events_documented_in_openapi(tenant: Tenant) -> None:
    schema = (await tenant.client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/audit_events"]["get"]

    assert {"action", "target", "limit", "cursor"} <= {p["name"] for p in operation["parameters"]}
    assert set(operation["responses"]) == {"200", "400", "401", "403", "503"}
    assert operation["responses"]["403"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorOut"
    }


async def test_audit_chain_intact_under_concurrent_disables_enables_and_other_changes(
    tenant: Tenant, make_agent: MakeAgent, ctx: Context
) -> None:
    """Disable and enable run as one direct hop on SQLite (`Database.transact`), beside
    changes made in sessions: the organization's chain still has one event per change, in
    one unforked sequence."""
    api = tenant.client
    agent = await make_agent(tenant)
    path = f"/v1/agents/{agent['id']}"
    before = len(await events(tenant, limit=100))
    requests = [api.post(f"{path}/{verb}") for verb in ("disable", "enable") * 8]
    requests += [api.post("/v1/api_keys", json={"name": f"k{n}"}) for n in range(6)]
    answers = await asyncio.gather(*requests)
    assert [answer.status_code for answer in answers] == [200] * 16 + [201] * 6
    [report] = await audit.verify_chains(ctx, org_id=tenant.org.id)
    assert report.ok, report.first_bad
    recorded = await events(tenant, limit=100)
    assert len(recorded) == before + 22
    actions = [event["action"] for event in recorded[:22]]
    assert sorted(set(actions)) == ["agent.disable", "agent.enable", "api_key.create"]
