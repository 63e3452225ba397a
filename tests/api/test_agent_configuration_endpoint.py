"""An agent's `configuration_endpoint` as a field (API.md section 17; the rules of
services/configuration_endpoints.py): checked as webhook tools' URLs are, the secret made
once and shown once, header values masked when shown and sealed at rest, null removes it.
The calls it makes are tested end to end in tests/e2e/test_configuration_endpoint.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from sqlalchemy import text
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.db.engine import create_engine

pytestmark = pytest.mark.anyio

URL = "https://config.example.com/parley"


async def create(tenant: Tenant, endpoint: Any, **fields: Any) -> Any:
    return await tenant.client.post(
        "/v1/agents", json={"name": "front-desk", "configuration_endpoint": endpoint, **fields}
    )


async def stored_endpoint(database_url: str, agent_id: str) -> dict[str, Any] | None:
    """The agent's column as the database holds it."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            stored = await connection.scalar(
                text("SELECT configuration_endpoint FROM agents WHERE id = :id"), {"id": agent_id}
            )
    finally:
        await engine.dispose()
    found: dict[str, Any] | None = json.loads(stored) if isinstance(stored, str) else stored
    return found


async def test_configuration_endpoint_default_null(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    assert agent["configuration_endpoint"] is None


async def test_configuration_endpoint_create_secret_shown_once_headers_masked(
    tenant: Tenant, database_url: str
) -> None:
    response = await create(
        tenant, {"url": URL, "headers": {"Authorization": "Bearer sk-customer-123"}}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    secret = body["configuration_endpoint_secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
    assert body["agent"]["configuration_endpoint"] == {
        "url": URL,
        "headers": {"Authorization": "********"},
        "timeout_ms": 3000,
    }
    shown = [(await tenant.client.get("/v1/agents/front-desk")).json()]
    shown += [(await tenant.client.get("/v1/agents")).json()]
    for page in shown:
        assert secret not in str(page)
        assert "sk-customer-123" not in str(page)
        assert "configuration_endpoint_secret" not in str(page)
    at_rest = str(await stored_endpoint(database_url, body["id"]))
    assert "Authorization" in at_rest
    assert "sk-customer-123" not in at_rest
    assert secret.removeprefix("whsec_") not in at_rest


async def test_configuration_endpoint_create_without_one_no_secret_member(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "front-desk"})
    assert response.status_code == 201, response.text
    assert set(response.json()) == {"agent", "id", "name"}


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ({"url": "http://config.example.com/x"}, "https"),
        ({"url": "https://127.0.0.1/x"}, "public"),
        ({"url": "https://localhost/x"}, "public"),
        ({"url": "not a url"}, "https"),
        ({"url": URL, "timeout_ms": 99}, "between 100 and 10000"),
        ({"url": URL, "timeout_ms": 10_001}, "between 100 and 10000"),
        ({"url": URL, "headers": {"Host": "evil.example.com"}}, "Host"),
        ({"url": URL, "headers": {"Transfer-Encoding": "chunked"}}, "Transfer-Encoding"),
    ],
    ids=[
        "http",
        "private-address",
        "localhost",
        "not-a-url",
        "timeout-too-short",
        "timeout-too-long",
        "host-header",
        "framing-header",
    ],
)
async def test_configuration_endpoint_invalid_refused_400_naming_field(
    tenant: Tenant, endpoint: dict[str, Any], why: str
) -> None:
    body = assert_error(await create(tenant, endpoint), 400, "validation_error")
    assert why in body["param_errors"]["configuration_endpoint"]
    assert (await tenant.client.get("/v1/agents/front-desk")).status_code == 404  # not stored


@pytest.mark.parametrize(
    "endpoint",
    [
        {"headers": {}},
        {"url": URL, "headers": {"bad name": "x"}},
        {"url": URL, "timeout_ms": "3000"},
        {"url": URL, "retries": 3},
        "https://config.example.com/parley",
    ],
    ids=["no-url", "bad-header-name", "timeout-as-text", "unknown-member", "a-bare-url"],
)
async def test_configuration_endpoint_malformed_refused_400(tenant: Tenant, endpoint: Any) -> None:
    body = assert_error(await create(tenant, endpoint), 400, "validation_error")
    assert any(key.startswith("configuration_endpoint") for key in body["param_errors"])


async def test_configuration_endpoint_patch_keeps_secret_null_removes_new_secret_after(
    tenant: Tenant, database_url: str
) -> None:
    created = (await create(tenant, {"url": URL, "headers": {"X-Api-Key": "k-1"}})).json()
    first = created["configuration_endpoint_secret"]
    changed = await tenant.client.patch(
        "/v1/agents/front-desk",
        json={"configuration_endpoint": {"url": URL + "/v2", "timeout_ms": 100}},
    )
    assert changed.status_code == 200, changed.text
    # The secret is kept, not shown again.
    assert set(changed.json()) == {"agent", "success", "version_number"}
    assert changed.json()["agent"]["configuration_endpoint"] == {
        "url": URL + "/v2",
        "headers": {},
        "timeout_ms": 100,
    }
    kept = await stored_endpoint(database_url, created["id"])
    renamed = await tenant.client.patch("/v1/agents/front-desk", json={"name": "lobby"})
    assert renamed.status_code == 200, renamed.text
    assert await stored_endpoint(database_url, created["id"]) == kept  # untouched by the rename
    removed = await tenant.client.patch("/v1/agents/lobby", json={"configuration_endpoint": None})
    assert removed.status_code == 200, removed.text
    assert removed.json()["agent"]["configuration_endpoint"] is None
    assert await stored_endpoint(database_url, created["id"]) is None
    again = await tenant.client.patch(
        "/v1/agents/lobby", json={"configuration_endpoint": {"url": URL}}
    )
    second = again.json()["configuration_endpoint_secret"]
    assert second.startswith("whsec_")
    assert second != first


async def test_configuration_endpoint_masked_header_keeps_value_unknown_one_400(
    tenant: Tenant, database_url: str
) -> None:
    created = (await create(tenant, {"url": URL, "headers": {"X-Api-Key": "k-1"}})).json()
    before = await stored_endpoint(database_url, created["id"])
    same = await tenant.client.patch(
        "/v1/agents/front-desk",
        json={"configuration_endpoint": {"url": URL, "headers": {"x-api-key": "********"}}},
    )
    assert same.status_code == 200, same.text
    after = await stored_endpoint(database_url, created["id"])
    assert before is not None
    assert after is not None
    assert after["headers"] == {"x-api-key": before["headers"]["X-Api-Key"]}  # kept as sealed
    assert after["secret"] == before["secret"]
    unknown = await tenant.client.patch(
        "/v1/agents/front-desk",
        json={"configuration_endpoint": {"url": URL, "headers": {"X-Other": "********"}}},
    )
    body = assert_error(unknown, 400, "validation_error")
    assert "X-Other" in body["param_errors"]["configuration_endpoint"]
