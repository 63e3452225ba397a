"""API keys over HTTP (API.md sections 1 and 2)."""

from __future__ import annotations

import re

import httpx
import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.credentials import hash_secret

pytestmark = pytest.mark.anyio


async def test_create_api_key_shows_secret_once(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/api_keys", json={"name": "ci"})

    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"parley_sk_[A-Za-z0-9_-]{43}", body["api_key"])
    key = {name: body[name] for name in ("id", "name", "prefix", "last4", "created_at")}
    assert key["prefix"] == "parley_sk_"
    assert key["last4"] == body["api_key"][-4:]
    listed = (await tenant.client.get("/v1/api_keys")).json()
    assert key in listed["api_keys"]
    assert body["api_key"] not in str(listed)


async def test_create_api_key_without_body_succeeds(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/api_keys")
    assert response.status_code == 201
    assert response.json()["name"] is None


async def test_api_key_stored_only_as_hash(tenant: Tenant, database_url: str) -> None:
    from sqlalchemy import text

    from parley.db.engine import create_engine

    secret = (await tenant.client.post("/v1/api_keys", json={"name": "h"})).json()["secret"]
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT * FROM api_keys"))).all()
    finally:
        await engine.dispose()
    dumped = repr(rows)
    assert secret not in dumped
    assert hash_secret(secret) in dumped


async def test_delete_api_key_stops_it_next_request(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    created = (await tenant.client.post("/v1/api_keys", json={"name": "gone"})).json()
    headers = {"Authorization": f"Bearer {created['secret']}"}

    deleted = await tenant.client.delete(f"/v1/api_keys/{created['id']}")

    assert deleted.json() == {"success": True}
    assert_error(await client.get("/v1/projects", headers=headers), 401, "unauthorized")
    ids = [k["id"] for k in (await tenant.client.get("/v1/api_keys")).json()["api_keys"]]
    assert created["id"] not in ids


async def test_delete_api_key_of_other_org_403(tenant: Tenant, other_tenant: Tenant) -> None:
    theirs = (await other_tenant.client.post("/v1/api_keys", json={})).json()
    response = await tenant.client.delete(f"/v1/api_keys/{theirs['id']}")
    assert_error(response, 403, "forbidden")


async def test_delete_unknown_api_key_404(tenant: Tenant) -> None:
    response = await tenant.client.delete("/v1/api_keys/key_" + "0" * 32)
    assert_error(response, 404, "api_key_not_found")


async def test_create_api_key_invalid_name_400(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/api_keys", json={"name": ""})
    assert_error(response, 400, "validation_error")
