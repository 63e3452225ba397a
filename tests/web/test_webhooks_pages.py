"""The dashboard's webhook pages (API.md sections 10 and 14) over the real app: list, create
with the secret shown once, edit, rotate, delete, the deliveries paged, "Send again" on a
failed one (delivered by the app's own worker to a receiver on 127.0.0.1), CSRF, refused
forms and another organization's webhook."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI

from parley.clock import utcnow
from parley.config import Settings
from parley.db.repos import webhook_deliveries as delivery_repo
from parley.services import Context
from parley.services.events import EVENT_TYPES
from tests.types import Tenant
from tests.web.helpers import Browser, form_values, text_of
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

pytestmark = pytest.mark.anyio

URL = "https://hooks.example.com/parley"


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    # The receiver is on loopback over http; one retry, 1 s after the first attempt, so a
    # failing endpoint makes a `failed` delivery within about a second.
    built: Settings = settings_factory(
        outbound_allow_http=True, outbound_allow_private_networks=True, webhook_retry_schedule="1"
    )
    return built


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def make_webhook(tenant: Tenant, url: str = URL, **fields: Any) -> dict[str, Any]:
    """Create a webhook through the REST API; return it as GET shows it."""
    created = await tenant.client.post("/v1/webhooks", json={"url": url, **fields})
    assert created.status_code == 201, created.text
    webhook: dict[str, Any] = created.json()["webhook"]
    return webhook


async def stored(tenant: Tenant, webhook_id: str) -> dict[str, Any]:
    response = await tenant.client.get(f"/v1/webhooks/{webhook_id}")
    assert response.status_code == 200, response.text
    webhook: dict[str, Any] = response.json()["webhook"]
    return webhook


async def deliveries(tenant: Tenant, webhook_id: str) -> list[dict[str, Any]]:
    response = await tenant.client.get(f"/v1/webhooks/{webhook_id}/deliveries")
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["deliveries"]
    return listed


def edit_form(html: str) -> dict[str, str | list[str]]:
    """What the edit form posts now, its event types as repeated fields."""
    values: dict[str, str | list[str]] = {**form_values(html, "edit-webhook")}
    values["event_types"] = str(values["event_types"]).split(",")
    return values


async def until_status(tenant: Tenant, webhook_id: str, status: str) -> dict[str, Any]:
    """Wait (at most 10 s) until the webhook's one delivery has `status`; return it."""
    for _ in range(200):
        listed = await deliveries(tenant, webhook_id)
        if listed and listed[0]["status"] == status:
            return listed[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {status} delivery within 10 s: {listed}")


# --- the list ---------------------------------------------------------------------------


async def test_webhooks_page_lists_url_event_types_description_and_state(
    tenant: Tenant, browser: Browser
) -> None:
    await make_webhook(tenant, description="CRM sync")
    narrow = await make_webhook(
        tenant, "https://hooks.example.com/calls", event_types=["conversation.ended"]
    )
    await tenant.client.patch(f"/v1/webhooks/{narrow['id']}", json={"is_disabled": True})
    await signed_in(browser, tenant)

    page = await browser.http.get("/dashboard/webhooks")

    assert page.status_code == 200
    rows = text_of(page.text, "webhooks")
    assert URL in rows
    assert f"all {len(EVENT_TYPES)}" in rows
    assert "CRM sync" in rows
    assert "conversation.ended" in rows
    assert rows.count("disabled") == 1
    assert rows.count("enabled") == 1
    assert f'href="/dashboard/webhooks/{narrow["id"]}"' in page.text
    assert "whsec_" not in page.text
    assert '<a href="/dashboard/webhooks">Webhooks</a>' in page.text  # in the nav


async def test_webhooks_page_without_session_redirects_to_sign_in(browser: Browser) -> None:
    for path in ["/dashboard/webhooks", "/dashboard/webhooks/wh_" + "0" * 32]:
        response = await browser.http.get(path)
        assert response.status_code == 303
        assert response.headers["location"] == "/dashboard/sign-in"


# --- create -----------------------------------------------------------------------------


async def test_create_webhook_secret_shown_once_not_on_reload(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/webhooks")
    posted = form_values(page.text, "create-webhook")
    assert posted["event_types"] == ",".join(EVENT_TYPES)  # all ticked at first

    response = await browser.post(
        "/dashboard/webhooks",
        {
            **posted,
            "url": URL,
            "description": "CRM",
            "event_types": ["agent.created", "agent.deleted"],
        },
    )

    assert response.status_code == 200, response.text
    secret = text_of(response.text, "new-webhook-secret")
    assert secret.startswith("whsec_")
    [webhook] = (await tenant.client.get("/v1/webhooks")).json()["webhooks"]
    assert (webhook["url"], webhook["description"]) == (URL, "CRM")
    assert webhook["event_types"] == ["agent.created", "agent.deleted"]
    assert webhook["id"] in text_of(response.text, "created-webhook")
    for later in [
        await browser.http.get("/dashboard/webhooks"),
        await browser.http.get(f"/dashboard/webhooks/{webhook['id']}"),
    ]:
        assert later.status_code == 200
        assert secret not in later.text
        assert "whsec_" not in later.text


async def test_create_webhook_no_event_type_ticked_error_beside_event_types(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/webhooks", {"url": URL, "description": "Typed."})

    assert response.status_code == 400
    assert "at least one" in text_of(response.text, "create-webhook-event_types-error")
    kept = form_values(response.text, "create-webhook")
    assert (kept["url"], kept["description"]) == (URL, "Typed.")
    assert "event_types" not in kept  # none ticked, as posted
    assert (await tenant.client.get("/v1/webhooks")).json()["webhooks"] == []


async def test_create_webhook_bad_url_error_beside_url_form_kept(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    typed: dict[str, str | list[str]] = {
        "url": "ftp://files.example.com/in",
        "event_types": ["agent.created"],
    }

    response = await browser.post("/dashboard/webhooks", typed)

    assert response.status_code == 400
    assert "https" in text_of(response.text, "create-webhook-url-error")
    assert "validation_error" in text_of(response.text, "create-webhook-error")
    kept = form_values(response.text, "create-webhook")
    assert (kept["url"], kept["event_types"]) == ("ftp://files.example.com/in", "agent.created")
    assert "whsec_" not in response.text
    assert (await tenant.client.get("/v1/webhooks")).json()["webhooks"] == []


async def test_create_webhook_unknown_event_type_refused_by_field(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/webhooks", {"url": URL, "event_types": ["agent.created", "agent.exploded"]}
    )

    assert response.status_code == 400
    assert "agent.exploded" in text_of(response.text, "create-webhook-event_types-error")


# --- one webhook: edit, rotate, delete ----------------------------------------------------


async def test_edit_webhook_saves_what_the_form_posts(tenant: Tenant, browser: Browser) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")
    posted = edit_form(page.text)
    assert "is_disabled" not in posted

    response = await browser.post(
        f"/dashboard/webhooks/{webhook['id']}",
        {**posted, "url": URL + "/v2", "description": "Edited.",
         "event_types": ["conversation.started"], "is_disabled": "on"},
    )  # fmt: skip

    assert response.status_code == 303, response.text
    assert response.headers["location"] == (
        f"/dashboard/webhooks/{webhook['id']}?done=webhook_updated"
    )
    after = await stored(tenant, webhook["id"])
    assert (after["url"], after["description"]) == (URL + "/v2", "Edited.")
    assert after["event_types"] == ["conversation.started"]
    assert after["is_disabled"] is True
    shown = await browser.http.get(response.headers["location"])
    assert form_values(shown.text, "edit-webhook")["is_disabled"] == "on"

    enabled = edit_form(shown.text)
    del enabled["is_disabled"]  # unticked: re-enable
    await browser.post(f"/dashboard/webhooks/{webhook['id']}", enabled)
    assert (await stored(tenant, webhook["id"]))["is_disabled"] is False


async def test_edit_webhook_bad_url_form_kept_webhook_unchanged(
    tenant: Tenant, browser: Browser
) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")
    typed = {**edit_form(page.text), "url": "gopher://x", "description": "T."}

    response = await browser.post(f"/dashboard/webhooks/{webhook['id']}", typed)

    assert response.status_code == 400
    assert text_of(response.text, "edit-webhook-url-error")
    kept = form_values(response.text, "edit-webhook")
    assert (kept["url"], kept["description"]) == ("gopher://x", "T.")
    assert await stored(tenant, webhook["id"]) == webhook


async def test_rotate_webhook_secret_shown_once_not_on_reload(
    tenant: Tenant, browser: Browser
) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)

    response = await browser.post(f"/dashboard/webhooks/{webhook['id']}/rotate")

    assert response.status_code == 200, response.text
    secret = text_of(response.text, "new-webhook-secret")
    assert secret.startswith("whsec_")
    assert "24 hours" in text_of(response.text, "rotated-webhook")
    again = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")
    assert secret not in again.text
    assert "whsec_" not in again.text


async def test_delete_webhook_removes_it(tenant: Tenant, browser: Browser) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)

    response = await browser.post(f"/dashboard/webhooks/{webhook['id']}/delete")

    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/webhooks?done=webhook_deleted"
    assert (await tenant.client.get("/v1/webhooks")).json()["webhooks"] == []
    gone = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")
    assert gone.status_code == 404


# --- deliveries ---------------------------------------------------------------------------


async def test_webhook_page_lists_deliveries_paged(
    app: FastAPI, tenant: Tenant, browser: Browser
) -> None:
    webhook = await make_webhook(tenant, event_types=["agent.created"])
    # Disabled: the app's worker leaves its deliveries pending, as written here.
    await tenant.client.patch(f"/v1/webhooks/{webhook['id']}", json={"is_disabled": True})
    ctx: Context = app.state.context
    start = utcnow(ctx.clock) - timedelta(minutes=10)
    async with ctx.db.transaction() as session:
        for n in range(55):
            await delivery_repo.insert(
                session, msg_id=f"msg_{n:032x}", webhook_id=webhook["id"],
                org_id=tenant.org.id, event_type="agent.created", body="{}",
                now=start + timedelta(seconds=n),
            )  # fmt: skip
    await signed_in(browser, tenant)

    first = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")

    assert first.status_code == 200
    rows = text_of(first.text, "deliveries")
    assert rows.count("msg_") == 50
    assert f"msg_{54:032x}" in rows  # newest first
    assert f"msg_{4:032x}" not in rows
    assert "pending" in rows
    assert "Send again" not in rows  # only a failed delivery has the button
    older = text_of(first.text, "older-deliveries")
    assert older == "Older"
    link = first.text.split('id="older-deliveries"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = await browser.http.get(link.replace("&amp;", "&"))
    assert second.status_code == 200
    assert text_of(second.text, "deliveries").count("msg_") == 5
    assert 'id="older-deliveries"' not in second.text


async def test_webhook_page_bad_cursor_400_page(tenant: Tenant, browser: Browser) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)

    response = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}?cursor=nope")

    assert response.status_code == 400
    assert "invalid_cursor" in response.text


async def test_send_again_failed_delivery_requeues_it_and_the_worker_delivers_it(
    tenant: Tenant, browser: Browser, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({}, status=500))
    webhook = await make_webhook(tenant, receiver.url(), event_types=["agent.created"])
    await tenant.client.post("/v1/agents", json={"name": "retried"})
    failed = await until_status(tenant, webhook["id"], "failed")
    assert (failed["attempts"], failed["last_status_code"]) == (2, 500)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/webhooks/{webhook['id']}")
    row = text_of(page.text, f"delivery-{failed['id']}")
    assert "failed" in row
    assert "agent.created" in row
    assert "500" in row
    assert f'id="retry-{failed["id"]}"' in page.text
    receiver.script(Reply.json({}))

    response = await browser.post(
        f"/dashboard/webhooks/{webhook['id']}/deliveries/{failed['id']}/retry"
    )

    assert response.status_code == 303, response.text
    assert response.headers["location"] == (
        f"/dashboard/webhooks/{webhook['id']}?done=delivery_retried&retried={failed['id']}"
    )
    delivered = await until_status(tenant, webhook["id"], "delivered")
    assert (delivered["id"], delivered["attempts"]) == (failed["id"], 3)
    assert {r.headers["webhook-id"] for r in receiver.requests} == {failed["id"]}
    shown = await browser.http.get(response.headers["location"])
    assert "Delivery sent again." in shown.text
    assert failed["id"] in text_of(shown.text, "retried-note")
    assert 'class="retried"' in shown.text
    assert "delivered" in text_of(shown.text, f"delivery-{failed['id']}")
    assert f'id="retry-{failed["id"]}"' not in shown.text


async def test_send_again_unknown_delivery_404_page(tenant: Tenant, browser: Browser) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)

    for msg_id in ["msg_" + "0" * 32, "nope"]:
        response = await browser.post(
            f"/dashboard/webhooks/{webhook['id']}/deliveries/{msg_id}/retry"
        )
        assert response.status_code == 404
        assert "delivery_not_found" in response.text


# --- attacks ----------------------------------------------------------------------------


async def test_webhook_forms_without_csrf_token_refused_nothing_changed(
    tenant: Tenant, browser: Browser
) -> None:
    webhook = await make_webhook(tenant)
    await signed_in(browser, tenant)
    base = f"/dashboard/webhooks/{webhook['id']}"
    posts = [
        ("/dashboard/webhooks", {"url": URL + "/forged", "event_types": "agent.created"}),
        (base, {"url": URL + "/forged", "event_types": "agent.created"}),
        (f"{base}/rotate", {}),
        (f"{base}/delete", {}),
        (f"{base}/deliveries/msg_{0:032x}/retry", {}),
    ]

    for path, data in posts:
        for token in [None, "0" * 64]:
            sent = data if token is None else {**data, "csrf_token": token}
            response = await browser.http.post(path, data=sent)
            assert response.status_code == 403, (path, token)
            assert "csrf_failed" in response.text
            assert "whsec_" not in response.text

    assert (await tenant.client.get("/v1/webhooks")).json()["webhooks"] == [webhook]


async def test_another_orgs_webhook_404_nothing_shown_nothing_changed(
    tenant: Tenant, other_tenant: Tenant, browser: Browser
) -> None:
    theirs = await make_webhook(other_tenant, URL + "/theirs", description="their secret CRM")
    await signed_in(browser, tenant)
    base = f"/dashboard/webhooks/{theirs['id']}"
    form = {"url": URL + "/mine", "event_types": "agent.created", "is_disabled": "on"}

    answers = [
        await browser.http.get(base),
        await browser.post(base, form),
        await browser.post(f"{base}/rotate"),
        await browser.post(f"{base}/deliveries/msg_{0:032x}/retry"),
        await browser.post(f"{base}/delete"),
    ]

    for answer in answers:
        assert answer.status_code == 404, answer.text
        assert "webhook_not_found" in answer.text
        assert "their secret CRM" not in answer.text
        assert "/theirs" not in answer.text
        assert "whsec_" not in answer.text
    assert await stored(other_tenant, theirs["id"]) == theirs
