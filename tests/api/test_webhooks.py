"""Webhooks over REST (API.md section 14), on SQLite and PostgreSQL, delivering to a real
receiver on 127.0.0.1 (the operator allows http and loopback here)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

from parley.config import Settings
from parley.services.events import EVENT_TYPES

pytestmark = pytest.mark.anyio

ALL_TYPES = list(EVENT_TYPES)


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(
        outbound_allow_http=True, outbound_allow_private_networks=True
    )
    return built


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


async def create(tenant: Tenant, url: str, **fields: Any) -> dict[str, Any]:
    response = await tenant.client.post("/v1/webhooks", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def deliveries(tenant: Tenant, webhook_id: str, **params: Any) -> dict[str, Any]:
    response = await tenant.client.get(f"/v1/webhooks/{webhook_id}/deliveries", params=params)
    assert response.status_code == 200, response.text
    listed: dict[str, Any] = response.json()
    return listed


async def until(predicate: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_create_webhook_shows_secret_once_and_all_event_types(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    created = await create(tenant, receiver.url(), description="CRM")
    assert created["secret"].startswith("whsec_")
    assert len(base64.b64decode(created["secret"].removeprefix("whsec_"))) == 32
    webhook = created["webhook"]
    assert webhook["id"].startswith("wh_")
    assert set(webhook) == {"id", "url", "event_types", "description", "is_disabled", "created_at"}
    assert webhook["event_types"] == ALL_TYPES
    assert webhook["description"] == "CRM"
    assert webhook["is_disabled"] is False
    read = await tenant.client.get(f"/v1/webhooks/{webhook['id']}")
    assert read.json() == {"webhook": webhook}
    assert "whsec_" not in read.text
    listed = await tenant.client.get("/v1/webhooks")
    assert listed.json() == {"webhooks": [webhook]}


async def test_create_webhook_event_types_kept_in_api_order(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    created = await create(
        tenant, receiver.url(), event_types=["agent.deleted", "conversation.ended"]
    )
    assert created["webhook"]["event_types"] == ["conversation.ended", "agent.deleted"]


@pytest.mark.parametrize(
    "event_types",
    [["agent.exploded"], ["agent.created", "nope"], []],
    ids=["unknown", "one_unknown", "empty"],
)
async def test_create_webhook_bad_event_types_400(
    tenant: Tenant, receiver: WebhookReceiver, event_types: list[str]
) -> None:
    response = await tenant.client.post(
        "/v1/webhooks", json={"url": receiver.url(), "event_types": event_types}
    )
    body = assert_error(response, 400, "validation_error")
    assert "event_types" in body["param_errors"]


async def test_webhook_of_another_organization_is_not_found(
    tenant: Tenant, other_tenant: Tenant, receiver: WebhookReceiver
) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    client = other_tenant.client
    base = f"/v1/webhooks/{webhook_id}"
    assert_error(await client.get(base), 404, "webhook_not_found")
    assert_error(await client.patch(base, json={"description": "x"}), 404, "webhook_not_found")
    assert_error(await client.delete(base), 404, "webhook_not_found")
    assert_error(await client.post(f"{base}/rotate_secret"), 404, "webhook_not_found")
    assert_error(await client.get(f"{base}/deliveries"), 404, "webhook_not_found")
    assert (await client.get("/v1/webhooks")).json() == {"webhooks": []}
    assert (await tenant.client.get(base)).status_code == 200


async def test_unknown_webhook_id_404(tenant: Tenant) -> None:
    for webhook_id in ("wh_" + "0" * 32, "nope"):
        assert_error(
            await tenant.client.get(f"/v1/webhooks/{webhook_id}"), 404, "webhook_not_found"
        )


async def test_update_webhook_changes_fields_and_reenables(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    base = f"/v1/webhooks/{webhook_id}"
    patched = await tenant.client.patch(
        base,
        json={"url": receiver.url("/other"), "event_types": ["agent.created"], "is_disabled": True},
    )
    assert patched.status_code == 200, patched.text
    webhook = patched.json()["webhook"]
    assert webhook["url"] == receiver.url("/other")
    assert webhook["event_types"] == ["agent.created"]
    assert webhook["is_disabled"] is True
    enabled = (await tenant.client.patch(base, json={"is_disabled": False})).json()["webhook"]
    assert enabled["is_disabled"] is False
    everything = (await tenant.client.patch(base, json={"event_types": None})).json()["webhook"]
    assert everything["event_types"] == ALL_TYPES


@pytest.mark.parametrize("field", ["url", "description", "is_disabled"])
async def test_update_webhook_null_field_400(
    tenant: Tenant, receiver: WebhookReceiver, field: str
) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    response = await tenant.client.patch(f"/v1/webhooks/{webhook_id}", json={field: None})
    assert_error(response, 400, "validation_error")


async def test_delete_webhook_then_not_found(tenant: Tenant, receiver: WebhookReceiver) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    deleted = await tenant.client.delete(f"/v1/webhooks/{webhook_id}")
    assert deleted.json() == {"success": True}
    assert_error(await tenant.client.get(f"/v1/webhooks/{webhook_id}"), 404, "webhook_not_found")


async def test_rotate_secret_returns_a_new_secret(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    created = await create(tenant, receiver.url())
    rotated = await tenant.client.post(f"/v1/webhooks/{created['webhook']['id']}/rotate_secret")
    assert rotated.status_code == 200, rotated.text
    assert set(rotated.json()) == {"secret"}
    assert rotated.json()["secret"].startswith("whsec_")
    assert rotated.json()["secret"] != created["secret"]


async def test_webhook_changes_are_audited(tenant: Tenant, receiver: WebhookReceiver) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    base = f"/v1/webhooks/{webhook_id}"
    await tenant.client.patch(base, json={"description": "new"})
    await tenant.client.post(f"{base}/rotate_secret")
    await tenant.client.delete(base)
    listed = await tenant.client.get("/v1/audit_events", params={"target": webhook_id})
    actions = [event["action"] for event in listed.json()["audit_events"]]
    assert sorted(actions) == sorted(
        ["webhook.create", "webhook.update", "webhook.rotate_secret", "webhook.delete"]
    )
    assert "whsec_" not in listed.text


async def test_agent_change_listed_as_delivered_delivery(
    tenant: Tenant, make_agent: MakeAgent, receiver: WebhookReceiver
) -> None:
    webhook_id = (await create(tenant, receiver.url(), event_types=["agent.created"]))["webhook"][
        "id"
    ]
    agent = await make_agent(tenant)

    async def delivered() -> bool:
        listed = await deliveries(tenant, webhook_id)
        return bool(listed["deliveries"]) and listed["deliveries"][0]["status"] == "delivered"

    await until(delivered)
    (delivery,) = (await deliveries(tenant, webhook_id))["deliveries"]
    assert delivery["id"].startswith("msg_")
    assert delivery["event_type"] == "agent.created"
    assert delivery["attempts"] == 1
    assert delivery["last_status_code"] == 200
    assert delivery["next_attempt_at"] is None
    (request,) = receiver.requests
    assert request.json()["data"] == {"agent": agent}
    assert request.headers["webhook-id"] == delivery["id"]


async def test_list_deliveries_pages_newest_first(
    tenant: Tenant, make_agent: MakeAgent, receiver: WebhookReceiver
) -> None:
    webhook_id = (await create(tenant, receiver.url(), event_types=["agent.created"]))["webhook"][
        "id"
    ]
    for _ in range(3):
        await make_agent(tenant)
    first = await deliveries(tenant, webhook_id, limit=2)
    assert len(first["deliveries"]) == 2
    assert first["next_cursor"]
    second = await deliveries(tenant, webhook_id, limit=2, cursor=first["next_cursor"])
    assert len(second["deliveries"]) == 1
    assert second["next_cursor"] is None
    ids = [d["id"] for d in first["deliveries"] + second["deliveries"]]
    assert len(set(ids)) == 3
    assert_error(
        await tenant.client.get(f"/v1/webhooks/{webhook_id}/deliveries", params={"cursor": "x"}),
        400,
        "invalid_cursor",
    )


async def test_retry_delivery_sends_a_failing_one_again_now(
    tenant: Tenant, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({}, status=500))
    webhook_id = (await create(tenant, receiver.url(), event_types=["agent.created"]))["webhook"][
        "id"
    ]
    await tenant.client.post("/v1/agents", json={"name": "retried"})

    async def first_attempt() -> bool:
        listed = (await deliveries(tenant, webhook_id))["deliveries"]
        return bool(listed) and listed[0]["attempts"] == 1

    await until(first_attempt)
    (delivery,) = (await deliveries(tenant, webhook_id))["deliveries"]
    assert delivery["status"] == "pending"
    assert delivery["last_status_code"] == 500
    assert delivery["next_attempt_at"] is not None
    receiver.script(Reply.json({}))
    retried = await tenant.client.post(
        f"/v1/webhooks/{webhook_id}/deliveries/{delivery['id']}/retry"
    )
    assert retried.status_code == 200, retried.text

    async def delivered() -> bool:
        listed = (await deliveries(tenant, webhook_id))["deliveries"]
        return bool(listed[0]["status"] == "delivered")

    await until(delivered)
    assert len(receiver.requests) == 2
    assert {r.headers["webhook-id"] for r in receiver.requests} == {delivery["id"]}


async def test_retry_unknown_delivery_404(tenant: Tenant, receiver: WebhookReceiver) -> None:
    webhook_id = (await create(tenant, receiver.url()))["webhook"]["id"]
    for msg_id in ("msg_" + "0" * 32, "nope"):
        response = await tenant.client.post(f"/v1/webhooks/{webhook_id}/deliveries/{msg_id}/retry")
        assert_error(response, 404, "delivery_not_found")
