"""API keys in the official SDK's shapes: create, rename, rotate with or without a grace
window, delete (API.md sections 2 and 17), through the SDK and raw HTTP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic
from phonic.core.api_error import ApiError
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.app import create_app
from parley.config import Settings
from parley.credentials import hash_secret
from parley.services import Context, api_keys

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


class MovableClock:
    """The real clock, plus an offset a test moves forward to end a grace window."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


@pytest.fixture
def clock() -> MovableClock:
    return MovableClock()


@pytest.fixture
async def app(settings: Settings, clock: MovableClock) -> AsyncIterator[FastAPI]:
    application = create_app(settings, clock=clock)
    async with application.router.lifespan_context(application):
        yield application


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def status_with(client: httpx.AsyncClient, secret: str) -> int:
    return (await client.get("/v1/projects", headers=bearer(secret))).status_code


async def create_key(tenant: Tenant, name: str = "ci") -> dict[str, Any]:
    created = await tenant.client.post("/v1/api_keys", json={"name": name})
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


async def rotate(tenant: Tenant, key_id: str, **body: Any) -> httpx.Response:
    return await tenant.client.post(f"/v1/api_keys/{key_id}/rotate", json=body or None)


async def audit_events(tenant: Tenant, action: str) -> list[dict[str, Any]]:
    listed = (await tenant.client.get("/v1/audit_events")).json()["audit_events"]
    return [event for event in listed if event["action"] == action]


# --- the SDK ------------------------------------------------------------------------------


async def test_api_keys_sdk_create_update_rotate_delete(
    sdk: AsyncPhonic, tenant: Tenant, client: httpx.AsyncClient
) -> None:
    created = await sdk.api_keys.create(name="ci")
    assert created.id.startswith("key_")
    assert created.name == "ci"
    assert created.api_key.startswith("parley_sk_")
    assert await status_with(client, created.api_key) == 200

    assert (await sdk.api_keys.update(created.id, name="deploys")).success is True
    listed = (await tenant.client.get("/v1/api_keys")).json()["api_keys"]
    assert {key["id"]: key["name"] for key in listed}[created.id] == "deploys"

    rotated = await sdk.api_keys.rotate(created.id)
    assert (rotated.id, rotated.name) == (created.id, "deploys")
    assert rotated.api_key.startswith("parley_sk_")
    assert rotated.api_key != created.api_key
    assert await status_with(client, rotated.api_key) == 200
    assert await status_with(client, created.api_key) == 401

    assert (await sdk.api_keys.delete(created.id)).success is True
    assert await status_with(client, rotated.api_key) == 401
    with pytest.raises(ApiError) as missing:
        await sdk.api_keys.rotate(created.id)
    assert missing.value.status_code == 404


# --- creation's shape -----------------------------------------------------------------------


async def test_create_api_key_answers_sdk_shape_with_listing_members(tenant: Tenant) -> None:
    body = await create_key(tenant)
    assert set(body) == {"id", "name", "api_key", "prefix", "last4", "created_at", "secret"}
    assert body["api_key"] == body["secret"]
    assert body["last4"] == body["api_key"][-4:]
    assert body["prefix"] == "parley_sk_"


# --- rename -----------------------------------------------------------------------------


async def test_update_api_key_renames_it_audited(tenant: Tenant) -> None:
    key = await create_key(tenant, "old")
    renamed = await tenant.client.patch(f"/v1/api_keys/{key['id']}", json={"name": "new"})
    assert renamed.json() == {"success": True}
    listed = (await tenant.client.get("/v1/api_keys")).json()["api_keys"]
    assert [k["name"] for k in listed if k["id"] == key["id"]] == ["new"]
    (event,) = await audit_events(tenant, "api_key.rename")
    assert event["details"] == {"name": "new", "previous_name": "old"}


@pytest.mark.parametrize(
    "body", [{}, {"name": ""}, {"name": "x" * 101}], ids=["missing", "empty", "too-long"]
)
async def test_update_api_key_invalid_name_400(tenant: Tenant, body: dict[str, Any]) -> None:
    key = await create_key(tenant)
    answer = await tenant.client.patch(f"/v1/api_keys/{key['id']}", json=body)
    assert_error(answer, 400, "validation_error")


@pytest.mark.parametrize("action", ["patch", "rotate"])
async def test_change_unknown_api_key_404(tenant: Tenant, action: str) -> None:
    path = "/v1/api_keys/key_" + "0" * 32
    if action == "patch":
        answer = await tenant.client.patch(path, json={"name": "x"})
    else:
        answer = await tenant.client.post(f"{path}/rotate")
    assert_error(answer, 404, "api_key_not_found")


@pytest.mark.parametrize("action", ["patch", "rotate"])
async def test_change_api_key_of_other_org_403(
    tenant: Tenant, other_tenant: Tenant, action: str
) -> None:
    theirs = await create_key(other_tenant)
    path = f"/v1/api_keys/{theirs['id']}"
    if action == "patch":
        answer = await tenant.client.patch(path, json={"name": "mine"})
    else:
        answer = await tenant.client.post(f"{path}/rotate")
    assert_error(answer, 403, "forbidden")
    assert await status_with(other_tenant.client, theirs["api_key"]) == 200


# --- rotation ---------------------------------------------------------------------------


async def test_rotate_api_key_without_grace_old_secret_stops_at_once(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    key = await create_key(tenant)
    assert await status_with(client, key["api_key"]) == 200  # remembered (embedded mode)
    assert await status_with(client, key["api_key"]) == 200

    answer = await rotate(tenant, key["id"])

    assert answer.status_code == 200, answer.text
    rotated = answer.json()
    assert set(rotated) == {"id", "name", "api_key"}
    assert (rotated["id"], rotated["name"]) == (key["id"], "ci")
    assert_error(
        await client.get("/v1/projects", headers=bearer(key["api_key"])), 401, "unauthorized"
    )
    assert await status_with(client, rotated["api_key"]) == 200
    listed = (await tenant.client.get("/v1/api_keys")).json()["api_keys"]
    assert [k["last4"] for k in listed if k["id"] == key["id"]] == [rotated["api_key"][-4:]]
    (event,) = await audit_events(tenant, "api_key.rotate")
    assert event["details"] == {
        "name": "ci",
        "last4": rotated["api_key"][-4:],
        "previous_last4": key["last4"],
        "grace_seconds": 0,
    }


async def test_rotate_api_key_with_grace_old_secret_works_until_grace_ends(
    tenant: Tenant, client: httpx.AsyncClient, clock: MovableClock
) -> None:
    key = await create_key(tenant)

    rotated = (await rotate(tenant, key["id"], grace_seconds=600)).json()

    assert await status_with(client, rotated["api_key"]) == 200
    assert await status_with(client, key["api_key"]) == 200
    clock.offset += 590
    assert await status_with(client, key["api_key"]) == 200
    clock.offset += 11
    assert await status_with(client, key["api_key"]) == 401
    assert await status_with(client, rotated["api_key"]) == 200


async def test_rotate_api_key_grace_uses_counted_in_audit_trail(
    tenant: Tenant, client: httpx.AsyncClient, ctx: Context, timer_stopped: None
) -> None:
    # The instance's timer flushes the counts too, at a moment the machine's load decides:
    # stopped, so that this test's flushes are the only ones.
    key = await create_key(tenant)
    await rotate(tenant, key["id"], grace_seconds=60)
    for _ in range(3):
        assert await status_with(client, key["api_key"]) == 200
    assert await audit_events(tenant, "api_key.grace_use") == []  # counted, not yet written

    assert await api_keys.flush_grace_uses(ctx) == 3

    (event,) = await audit_events(tenant, "api_key.grace_use")
    assert (event["target"], event["details"]) == (key["id"], {"uses": 3})
    assert event["actor"] == {"kind": "system", "id": None}
    assert await api_keys.flush_grace_uses(ctx) == 0


async def test_rotate_api_key_without_grace_ends_earlier_grace(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    key = await create_key(tenant)
    second = (await rotate(tenant, key["id"], grace_seconds=3600)).json()
    assert await status_with(client, key["api_key"]) == 200

    third = (await rotate(tenant, key["id"], grace_seconds=0)).json()

    assert await status_with(client, key["api_key"]) == 401
    assert await status_with(client, second["api_key"]) == 401
    assert await status_with(client, third["api_key"]) == 200


async def test_delete_api_key_ends_its_grace_secrets(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    key = await create_key(tenant)
    await rotate(tenant, key["id"], grace_seconds=3600)
    assert await status_with(client, key["api_key"]) == 200

    assert (await tenant.client.delete(f"/v1/api_keys/{key['id']}")).status_code == 200

    assert await status_with(client, key["api_key"]) == 401


@pytest.mark.parametrize(
    "grace",
    [-1, 86_401, "60", True],
    ids=["negative", "over-a-day", "string", "bool"],
)
async def test_rotate_api_key_bad_grace_400(tenant: Tenant, grace: object) -> None:
    key = await create_key(tenant)
    answer = await rotate(tenant, key["id"], grace_seconds=grace)
    body = assert_error(answer, 400, "validation_error")
    assert set(body["param_errors"]) == {"grace_seconds"}
    assert await status_with(tenant.client, key["api_key"]) == 200  # nothing rotated


async def test_rotate_api_key_grace_bounds_accepted(tenant: Tenant) -> None:
    key = await create_key(tenant)
    assert (await rotate(tenant, key["id"], grace_seconds=86_400)).status_code == 200
    assert (await rotate(tenant, key["id"], grace_seconds=0)).status_code == 200


async def test_rotated_api_key_secrets_stored_only_as_hashes(
    tenant: Tenant, database_url: str
) -> None:
    from sqlalchemy import text

    from parley.db.engine import create_engine

    key = await create_key(tenant)
    rotated = (await rotate(tenant, key["id"], grace_seconds=60)).json()
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            keys = (await connection.execute(text("SELECT * FROM api_keys"))).all()
            grace = (await connection.execute(text("SELECT * FROM api_key_grace_secrets"))).all()
    finally:
        await engine.dispose()
    dumped = repr(keys) + repr(grace)
    assert key["api_key"] not in dumped
    assert rotated["api_key"] not in dumped
    assert hash_secret(rotated["api_key"]) in repr(keys)
    assert hash_secret(key["api_key"]) in repr(grace)
