"""Session tokens over REST (API.md sections 1 and 6)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import httpx
import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_create_session_token_defaults(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/auth/session_token")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"id", "session_token", "expires_at"}
    assert body["id"].startswith("sess_")
    assert re.fullmatch(r"parley_st_[A-Za-z0-9_-]{43}", body["session_token"])
    expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert abs((expires - datetime.now(UTC)).total_seconds() - 300) < 10


@pytest.mark.parametrize(
    "body",
    [
        {"ttl_seconds": 59},
        {"ttl_seconds": 3601},
        {"ttl_seconds": "300"},
        {"conversation_ids": [f"c{n}" for n in range(101)]},
        {"conversation_ids": ["bad id with spaces"]},
        {"unknown": 1},
    ],
    ids=["ttl-low", "ttl-high", "ttl-string", "too-many-ids", "bad-id", "unknown-field"],
)
async def test_create_session_token_invalid_400(tenant: Tenant, body: dict[str, object]) -> None:
    response = await tenant.client.post("/v1/auth/session_token", json=body)
    assert_error(response, 400, "validation_error")


async def test_create_session_token_bad_conversation_id_reported_under_its_field(
    tenant: Tenant,
) -> None:
    """`param_errors` names the field of the body: `conversation_ids.1`, not `id`."""
    response = await tenant.client.post(
        "/v1/auth/session_token", json={"conversation_ids": ["ok-1", "bad id"]}
    )
    body = assert_error(response, 400, "validation_error")
    assert set(body["param_errors"]) == {"conversation_ids.1"}


async def test_session_token_may_read_conversations_only(
    tenant: Tenant, make_agent: MakeAgent, client: httpx.AsyncClient
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post("/v1/conversations", json={"agent": agent["name"], "id": "c1"})
    token = (await tenant.client.post("/v1/auth/session_token")).json()["session_token"]

    assert (await client.get("/v1/conversations/c1", headers=bearer(token))).status_code == 200
    assert (await client.get("/v1/conversations", headers=bearer(token))).status_code == 200
    for method, path in [
        ("GET", "/v1/agents"),
        ("POST", f"/v1/agents/{agent['id']}/disable"),
        ("POST", "/v1/auth/session_token"),
        ("GET", "/v1/api_keys"),
        ("POST", "/v1/conversations/c1/end"),
    ]:
        response = await client.request(method, path, headers=bearer(token))
        assert_error(response, 403, "insufficient_scope")


async def test_restricted_session_token_reads_only_its_conversations(
    tenant: Tenant, make_agent: MakeAgent, client: httpx.AsyncClient
) -> None:
    agent = await make_agent(tenant)
    for conversation_id in ("mine", "other"):
        await tenant.client.post(
            "/v1/conversations", json={"agent": agent["name"], "id": conversation_id}
        )
    token = (
        await tenant.client.post("/v1/auth/session_token", json={"conversation_ids": ["mine"]})
    ).json()["session_token"]

    assert (await client.get("/v1/conversations/mine", headers=bearer(token))).status_code == 200
    assert_error(
        await client.get("/v1/conversations/other", headers=bearer(token)),
        403,
        "insufficient_scope",
    )
    listed = (await client.get("/v1/conversations", headers=bearer(token))).json()
    assert [c["id"] for c in listed["conversations"]] == ["mine"]


async def test_revoked_session_token_refused_next_request(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    created = (await tenant.client.post("/v1/auth/session_token")).json()
    assert (
        await client.get("/v1/conversations", headers=bearer(created["session_token"]))
    ).status_code == 200

    revoked = await tenant.client.delete(f"/v1/auth/session_token/{created['id']}")

    assert revoked.json() == {"success": True}
    response = await client.get("/v1/conversations", headers=bearer(created["session_token"]))
    assert_error(response, 401, "unauthorized")


async def test_revoke_session_token_of_other_org_403(tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = (await other_tenant.client.post("/v1/auth/session_token")).json()
    assert_error(
        await tenant.client.delete(f"/v1/auth/session_token/{theirs['id']}"), 403, "forbidden"
    )


async def test_revoke_unknown_session_token_404(tenant: Tenant) -> None:
    response = await tenant.client.delete("/v1/auth/session_token/sess_" + "0" * 32)
    assert_error(response, 404, "session_token_not_found")


async def test_session_token_of_other_org_cannot_read(
    tenant: Tenant, other_tenant: Tenant, make_agent: MakeAgent, client: httpx.AsyncClient
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post("/v1/conversations", json={"agent": agent["name"], "id": "private"})
    token = (await other_tenant.client.post("/v1/auth/session_token")).json()["session_token"]
    assert_error(
        await client.get("/v1/conversations/private", headers=bearer(token)),
        404,
        "conversation_not_found",
    )


async def test_session_token_stored_only_as_hash(tenant: Tenant, database_url: str) -> None:
    from sqlalchemy import text

    from parley.credentials import hash_secret
    from parley.db.engine import create_engine

    secret = (await tenant.client.post("/v1/auth/session_token")).json()["session_token"]
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = repr((await connection.execute(text("SELECT * FROM session_tokens"))).all())
    finally:
        await engine.dispose()
    assert secret not in rows
    assert hash_secret(secret) in rows
