"""Conversation tokens over REST (API.md section 17): issued with an API key for one agent,
30 to 60 seconds, stored as hashes, never a REST credential. The socket side is in
tests/e2e/test_conversation_token_ws.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from phonic import AsyncPhonic
from phonic.core.api_error import ApiError
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.credentials import hash_secret

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


async def issue(tenant: Tenant, **body: Any) -> httpx.Response:
    return await tenant.client.post("/v1/auth/conversation_token", json=body)


def seconds_left(expires_at: str) -> float:
    moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    return (moment - datetime.now(UTC)).total_seconds()


async def test_create_conversation_token_through_sdk(
    sdk: AsyncPhonic, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)

    made = await sdk.auth.create_conversation_token(agent_id=agent["id"], ttl_seconds=60)

    assert re.fullmatch(r"parley_ct_[A-Za-z0-9_-]{43}", made.conversation_token)
    assert 55 < (made.expires_at - datetime.now(UTC)).total_seconds() <= 60
    with pytest.raises(ApiError) as unknown:
        await sdk.auth.create_conversation_token(agent_id="agent_" + "0" * 32)
    assert unknown.value.status_code == 404


async def test_create_conversation_token_defaults_30s_audited(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)

    made = await issue(tenant, agent_id=agent["id"])

    assert made.status_code == 200, made.text
    body = made.json()
    assert set(body) == {"conversation_token", "expires_at"}
    assert 25 < seconds_left(body["expires_at"]) <= 30
    events = (await tenant.client.get("/v1/audit_events")).json()["audit_events"]
    (event,) = [e for e in events if e["action"] == "conversation_token.create"]
    assert (event["target"], event["details"]) == (agent["id"], {"ttl_seconds": 30})
    assert body["conversation_token"] not in str(events)


@pytest.mark.parametrize(
    "ttl", [29, 61, 0, "30", 30.5], ids=["under-30", "over-60", "zero", "string", "float"]
)
async def test_create_conversation_token_ttl_out_of_bounds_400(
    tenant: Tenant, make_agent: MakeAgent, ttl: object
) -> None:
    agent = await make_agent(tenant)
    body = assert_error(
        await issue(tenant, agent_id=agent["id"], ttl_seconds=ttl), 400, "validation_error"
    )
    assert set(body["param_errors"]) == {"ttl_seconds"}


@pytest.mark.parametrize("ttl", [30, 60])
async def test_create_conversation_token_ttl_bounds_accepted(
    tenant: Tenant, make_agent: MakeAgent, ttl: int
) -> None:
    agent = await make_agent(tenant)
    made = await issue(tenant, agent_id=agent["id"], ttl_seconds=ttl)
    assert made.status_code == 200, made.text
    assert ttl - 5 < seconds_left(made.json()["expires_at"]) <= ttl


async def test_create_conversation_token_unknown_agent_404(tenant: Tenant) -> None:
    assert_error(await issue(tenant, agent_id="agent_" + "0" * 32), 404, "agent_not_found")


async def test_create_conversation_token_other_org_agent_403(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant)
    assert_error(await issue(tenant, agent_id=theirs["id"]), 403, "forbidden")


async def test_create_conversation_token_without_agent_400(tenant: Tenant) -> None:
    body = assert_error(await issue(tenant), 400, "validation_error")
    assert set(body["param_errors"]) == {"agent_id"}


async def test_create_conversation_token_needs_api_key_403(
    tenant: Tenant, client: httpx.AsyncClient, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    session = (await tenant.client.post("/v1/auth/session_token")).json()["session_token"]
    answer = await client.post(
        "/v1/auth/conversation_token",
        json={"agent_id": agent["id"]},
        headers={"Authorization": f"Bearer {session}"},
    )
    assert_error(answer, 403, "insufficient_scope")


@pytest.mark.parametrize("path", ["/v1/agents", "/v1/conversations", "/v1/conversations/c1"])
async def test_conversation_token_on_rest_403_insufficient_scope(
    tenant: Tenant, client: httpx.AsyncClient, make_agent: MakeAgent, path: str
) -> None:
    agent = await make_agent(tenant)
    token = (await issue(tenant, agent_id=agent["id"])).json()["conversation_token"]
    answer = await client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert_error(answer, 403, "insufficient_scope")


async def test_conversation_token_stored_only_as_hash(
    tenant: Tenant, make_agent: MakeAgent, database_url: str
) -> None:
    from sqlalchemy import text

    from parley.db.engine import create_engine

    agent = await make_agent(tenant)
    token = (await issue(tenant, agent_id=agent["id"])).json()["conversation_token"]
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT * FROM conversation_tokens"))).all()
    finally:
        await engine.dispose()
    assert token not in repr(rows)
    assert hash_secret(token) in repr(rows)
