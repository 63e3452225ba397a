"""The operator story of the dashboard in headless Chromium against a real uvicorn server.

Sign in; register a JWKS URL served on loopback and see its key; break that server and see
the fetch error after a refresh; paste a static PEM key; create an agent, disable it, see the
badge and the refused edit, enable it; create and revoke an API key and see a session opened
with it end; create a session token, open a WebSocket with it, revoke it from the page and
see the socket close; read a transcript with its tool calls; see all of it on the activity
page, in order, with the actor. The tools story: create a webhook tool and see its signing
secret once, give it to an agent, see the refused delete. The phone and webhooks story: set
the Twilio account and see the voice URL and the agent's number; create a webhook and see its
secret once, see a delivery to a failing receiver on loopback fail, send it again and see it
delivered. A recording on a conversation's page loads in Chromium (the page's policy lets
its <audio> fetch the signed URL). With PARLEY_DOCS_SCREENSHOTS=1 the pages are saved into
docs/images/.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI
from playwright.async_api import Browser, Page, async_playwright

from parley.app import create_app
from parley.jwt import generate_key_pair, import_jwk
from parley.records import ToolCall
from parley.services import conversations, endings, recordings
from tests import databases, factories
from tests.e2e.conftest import Server, serving
from tests.e2e.test_browser_example import chromium_path
from tests.factories import make_org
from tests.jwks_server import JwksServer, running_jwks_server
from tests.ports import free_port
from tests.web.test_conversation_page import wav_bytes
from tests.webhook_receiver import Reply, running_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
LOOKUP_CALL = ToolCall(
    id="call_1", tool_id="tool_lookup", tool_name="lookup_order",
    parameters={"order_id": "A-17"}, output={"status": "shipped", "eta": "today"},
    endpoint_url="https://hooks.acme.example/orders", response_status_code=200, duration_ms=412,
)  # fmt: skip


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """SQLite only: the dashboard's rules run on both databases in tests/web."""
    return databases.sqlite_copy(sqlite_template, tmp_path)


@pytest.fixture
async def app(settings_factory: Any) -> AsyncIterator[FastAPI]:
    settings = settings_factory(
        public_url="http://127.0.0.1:8000", jwks_allow_http=True, jwks_allow_private_networks=True,
        # Webhooks to a receiver on loopback, one retry 1 s after a failed attempt.
        outbound_allow_http=True, outbound_allow_private_networks=True, webhook_retry_schedule="1",
    )  # fmt: skip
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    with running_jwks_server() as server:
        yield server


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_path(),
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )  # fmt: skip
        try:
            yield launched
        finally:
            await launched.close()


async def shot(page: Page, name: str) -> None:
    if os.environ.get("PARLEY_DOCS_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(DOCS_IMAGES / f"dashboard-{name}.png"), full_page=True)


async def sign_in(page: Page, server: Server, api_key: str) -> None:
    await page.goto(f"{server.http}/dashboard")
    assert page.url.endswith("/dashboard/sign-in")
    await page.fill("input[name=api_key]", api_key)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/dashboard/agents")


def public_pem() -> str:
    key = import_jwk(generate_key_pair("EdDSA", kid="static-1").jwks["keys"][0]).public_key
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode()


@pytest.mark.timeout(240)
async def test_dashboard_operator_story(
    app: FastAPI, server: Server, jwks: JwksServer, chromium: Browser
) -> None:
    ctx = app.state.context
    created = await make_org(ctx, "acme")
    key_id = created.api_key.api_key.id
    context = await chromium.new_context()
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    # Sign in.
    await sign_in(page, server, created.api_key.secret)
    assert created.api_key.secret not in await page.content()

    # Register a JWKS URL served on loopback; see its key and kid.
    pair = generate_key_pair("ES256", kid="k1")
    jwks.publish(*pair.jwks["keys"])
    await page.click("text=JWT settings")
    await page.fill("textarea[name=issuers]", "https://auth.acme.example")
    await page.check("input[name=source][value=jwks]")
    await page.fill("input[name=jwks_url]", jwks.url)
    await page.click("#save-jwt")
    await page.wait_for_selector("text=JWT settings saved.")
    keys_table = await page.inner_text("#keys")
    assert "k1" in keys_table
    assert "ES256" in keys_table
    assert await page.inner_text("#fetch-error") == "none"
    await shot(page, "jwt")

    # Break the JWKS server, refresh, see the fetch error (the key stays in force).
    jwks.down = True
    await page.click("#refresh")
    await page.wait_for_selector("text=Refresh failed")
    assert "503" in await page.inner_text("#fetch-error")
    assert "k1" in await page.inner_text("#keys")

    # The token checker explains a token signed with an unknown kid.
    await page.fill(
        "textarea[name=token]",
        "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsyIn0.eyJpc3MiOiJodHRwczovL2F1dGguYWNtZS5leGFtcGxlIn0.AA",
    )
    await page.click("#token-check button")
    verdict = await page.inner_text("#check-verdict")
    assert "Step 3 failed" in verdict
    assert "kid k2 is not in the JWKS fetched" in await page.inner_text("#check-steps")
    await shot(page, "token-checker")

    # Paste a static PEM key instead.
    await page.check("input[name=source][value=static]")
    await page.fill("textarea[name=public_keys]", public_pem())
    await page.click("#save-jwt")
    await page.wait_for_selector("text=JWT settings saved.")
    assert "static" in await page.inner_text("#keys")

    # Create an agent, disable it, see the badge, see the refused edit, enable it.
    await page.click("text=Agents")
    await page.fill("input[name=name]", "support")
    await page.fill("textarea[name=system_prompt]", "You help with orders.")
    await page.fill("textarea[name=phone_numbers]", "+14155550100")
    await page.click("text=Create agent")
    await page.wait_for_selector("text=Agent created.")
    agent_url = page.url.split("?")[0]
    await page.click("#disable")
    await page.wait_for_selector("text=Agent disabled")
    await page.click("nav >> text=Agents")
    assert "disabled" in await page.inner_text("table")
    await shot(page, "agents")
    await page.goto(agent_url)
    await page.fill("textarea[name=system_prompt]", "Changed while disabled.")
    await page.click("#edit-agent button")
    assert "The agent is disabled: it cannot be updated." in await page.content()
    assert "agent_disabled" in await page.content()
    await page.goto(agent_url)
    await page.click("#enable")
    await page.wait_for_selector("text=Agent enabled.")

    # Create an API key, open a second session with it, revoke it: that session ends.
    await page.click("text=API keys")
    await page.fill("input[name=name]", "temporary")
    await page.click("#create-key")
    new_secret = await page.inner_text("#new-secret")
    await shot(page, "api-keys")
    other_context = await chromium.new_context()
    other = await other_context.new_page()
    await sign_in(other, server, new_secret)
    await page.goto(f"{server.http}/dashboard/api-keys")
    assert new_secret not in await page.content()  # shown once
    temp_id = (await page.inner_text("tbody tr:has-text('temporary') code")).strip()
    await page.click(f"#revoke-{temp_id}")
    await page.wait_for_selector("text=API key revoked.")
    await other.reload()
    assert other.url.endswith("/dashboard/sign-in")
    await other_context.close()

    # Create a session token, open a socket with it, revoke it from the page: it closes.
    await page.click("text=Session tokens")
    await page.click("#create-token")
    token = await page.inner_text("#new-token")
    token_id = (await page.inner_text("tbody tr code")).strip()
    await page.goto(f"{server.http}/dashboard/session-tokens")
    async with websockets.connect(f"{server.ws}/v1/sts/ws?session_token={token}") as socket:
        await page.click(f"#revoke-{token_id}")
        await page.wait_for_selector("text=Session token revoked")
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(socket.recv(), 5)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == "session token revoked"

    # Read a conversation's transcript.
    conversation = await conversations.create_conversation(
        ctx, org_id=created.org.id, agent="support", project=None, conversation_id="order-42"
    )
    await conversations.add_item(
        ctx, org_id=created.org.id, conversation_id=conversation.id, role="user",
        text="Where is my order?",
    )  # fmt: skip
    await conversations.add_item(
        ctx, org_id=created.org.id, conversation_id=conversation.id, role="assistant",
        text="It ships today.", tool_calls=[LOOKUP_CALL],
    )  # fmt: skip
    await conversations.set_template_variables(
        ctx, org_id=created.org.id, conversation_id=conversation.id,
        values={"customer_name": "Ada"},
    )  # fmt: skip
    await page.click("text=Conversations")
    await page.click("text=order-42")
    transcript = await page.inner_text("#transcript")
    assert "Where is my order?" in transcript
    assert "It ships today." in transcript
    call = await page.inner_text("#tool-call-call_1")
    assert "lookup_order" in call
    assert "412 ms" in call
    assert "Ada" in await page.inner_text("#template-variables")
    await shot(page, "conversation")

    # Every action on the activity page, in order, with the actor.
    await page.click("text=Activity")
    rows = await page.eval_on_selector_all(
        "#activity tbody tr",
        "rows => rows.map(r => [r.querySelector('.action').innerText,"
        " r.querySelector('.actor').innerText])",
    )
    await shot(page, "activity")
    actions = [action for action, _ in reversed(rows)]
    assert actions == [
        "org.create",
        "api_key.create",
        "dashboard.sign_in",
        "jwt.update",
        "jwt.refresh",
        "jwt.update",
        "agent.create",
        "agent.disable",
        "agent.enable",
        "api_key.create",
        "dashboard.sign_in",
        "api_key.revoke",
        "session_token.create",
        "session_token.revoke",
    ]
    actors = [actor for _, actor in reversed(rows)]
    assert actors[:2] == ["operator", "operator"]
    assert set(actors[2:10] + actors[11:]) == {f"dashboard {key_id}"}
    assert actors[10] == f"dashboard {temp_id}"
    assert errors == []
    await context.close()


async def test_dashboard_framed_by_another_origin_stays_blank(
    app: FastAPI, server: Server, chromium: Browser
) -> None:
    page = await chromium.new_page()
    await page.set_content(f'<iframe id="f" src="{server.http}/dashboard/sign-in"></iframe>')
    await page.wait_for_timeout(1500)

    frame = page.frames[-1]
    assert frame is not page.main_frame
    assert "API key" not in await frame.content()


@pytest.mark.timeout(120)
async def test_dashboard_refused_form_shown_again_with_what_was_typed(
    app: FastAPI, server: Server, chromium: Browser
) -> None:
    created = await make_org(app.state.context, "typo")
    page = await chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await sign_in(page, server, created.api_key.secret)
    pasted = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAtruncated\n-----END PUBLIC KEY-----"

    # Paste a broken PEM key: refused, and the page comes back with everything typed.
    await page.click("text=JWT settings")
    await page.fill("textarea[name=issuers]", "https://auth.typo.example")
    await page.fill("input[name=audience]", "voice.typo.example")
    await page.check("input[name=source][value=static]")
    await page.fill("textarea[name=public_keys]", pasted)
    await page.check("input[name=require_jti]")
    await page.click("#save-jwt")
    await page.wait_for_selector("#jwt-settings-error")

    assert "key_rejected" in await page.inner_text("#jwt-settings-error")
    assert "key 1:" in await page.inner_text("#jwt-settings-public_keys-error")
    assert await page.input_value("textarea[name=public_keys]") == pasted
    assert await page.input_value("textarea[name=issuers]") == "https://auth.typo.example"
    assert await page.input_value("input[name=audience]") == "voice.typo.example"
    assert await page.is_checked("input[name=source][value=static]")
    assert await page.is_checked("input[name=require_jti]")
    invalid = await page.get_attribute("textarea[name=public_keys]", "aria-invalid")
    assert invalid == "true"

    # Correct only the key and send the same form again: saved.
    await page.fill("textarea[name=public_keys]", public_pem())
    await page.click("#save-jwt")
    await page.wait_for_selector("text=JWT settings saved.")
    keys = await page.inner_text("#keys")
    assert "EdDSA" in keys
    assert "static" in keys
    assert await page.is_checked("input[name=require_jti]")
    assert errors == []


@pytest.mark.timeout(120)
async def test_dashboard_tools_story(app: FastAPI, server: Server, chromium: Browser) -> None:
    created = await make_org(app.state.context, "tooling")
    page = await chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await sign_in(page, server, created.api_key.secret)

    # Create a webhook tool: its signing secret is shown once; header values never again.
    await page.click("nav >> text=Tools")
    form = "#create-tool"
    await page.fill(f"{form} input[name=name]", "lookup_order")
    await page.fill(f"{form} textarea[name=description]", "Find an order by its number.")
    await page.fill(
        f"{form} textarea[name=parameters]",
        '{"type": "object", "properties": {"order_id": {"type": "string"}},'
        ' "required": ["order_id"]}',
    )
    await page.fill(f"{form} input[name=endpoint_url]", "https://hooks.acme.example/orders")
    await page.fill(
        f"{form} textarea[name=endpoint_headers]", '{"Authorization": "Bearer header-secret"}'
    )
    await page.click("#create-tool-button")
    secret = await page.inner_text("#new-signing-secret")
    assert secret.startswith("whsec_")
    assert "header-secret" not in await page.content()

    # A WebSocket tool beside it.
    await page.fill(f"{form} input[name=name]", "show_map")
    await page.select_option(f"{form} select[name=type]", "custom_websocket")
    await page.fill(f"{form} input[name=tool_call_output_timeout_ms]", "8000")
    await page.click("#create-tool-button")
    await page.wait_for_selector("#new-signing-secret")

    # Give the webhook tool to an agent, with a template variable.
    await page.click("nav >> text=Agents")
    await page.fill("#create-agent input[name=name]", "support")
    await page.fill("#create-agent textarea[name=system_prompt]", "Help {{customer_name}}.")
    await page.check("#create-agent input[name=tools][value=lookup_order]")
    await page.check("#create-agent input[name=tools][value=natural_conversation_ending]")
    await page.locator("#create-agent input[name=variable_name]").first.fill("customer_name")
    await page.locator("#create-agent input[name=variable_default]").first.fill("there")
    await page.click("text=Create agent")
    await page.wait_for_selector("text=Agent created.")
    assert await page.is_checked("#edit-agent input[name=tools][value=lookup_order]")

    # The list: endpoint, masked headers, who uses it; the secret is gone after a reload.
    await page.click("nav >> text=Tools")
    table = await page.inner_text("#tools")
    assert "POST https://hooks.acme.example/orders" in table
    assert "client (WebSocket)" in table
    assert "Authorization: ••••••" in table
    assert "support" in table
    content = await page.content()
    assert secret not in content
    assert "header-secret" not in content
    await shot(page, "tools")

    # Deleting a tool an agent lists is refused on the tool's page.
    await page.click("#tools >> text=lookup_order")
    await page.click("#delete")
    refusal = await page.inner_text("#delete-tool-error")
    assert "tool_in_use" in refusal
    assert "support" in refusal
    await shot(page, "tool")
    assert errors == []


async def reload_until(page: Page, selector: str, text: str, seconds: float = 15.0) -> str:
    """Reload the page every 0.2 s until `selector` holds `text`; fail after `seconds`."""
    for _ in range(int(seconds / 0.2)):
        shown = await page.inner_text(selector)
        if text in shown:
            return shown
        await page.wait_for_timeout(200)
        await page.reload()
    raise AssertionError(f"{selector} did not show {text!r} within {seconds} s")


@pytest.mark.timeout(120)
async def test_dashboard_phone_and_webhooks_story(
    app: FastAPI, server: Server, chromium: Browser
) -> None:
    created = await make_org(app.state.context, "calls")
    page = await chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await sign_in(page, server, created.api_key.secret)
    token = "4f1c" * 7 + "b2d9"

    # An agent with a phone number, then the phone page: the voice URL and the number.
    await page.fill("#create-agent input[name=name]", "front-desk")
    await page.fill("#create-agent textarea[name=phone_numbers]", "+14155550123")
    await page.click("text=Create agent")
    await page.wait_for_selector("text=Agent created.")
    await page.click("nav >> text=Phone")
    voice_url = await page.inner_text("#voice-url")
    assert voice_url.strip() == "http://127.0.0.1:8000/v1/telephony/twilio/voice"
    assert "refused: no account" in await page.inner_text("#phone-numbers")

    # Set the Twilio account: the SID and the token's last 4 only, never the token.
    await page.fill("#twilio-account input[name=account_sid]", "AC" + "5e2a" * 8)
    await page.fill("#twilio-account input[name=auth_token]", token)
    await page.click("#save-twilio-account")
    await page.wait_for_selector("text=Twilio account saved")
    facts = await page.inner_text("#twilio-account-facts")
    assert "AC" + "5e2a" * 8 in facts
    assert "••••b2d9" in facts
    assert token not in await page.content()
    assert await page.input_value("#twilio-account input[name=auth_token]") == ""
    numbers = await page.inner_text("#phone-numbers")
    assert "+14155550123" in numbers
    assert "front-desk" in numbers
    assert "answered" in numbers
    await shot(page, "phone")

    with running_receiver() as receiver:
        receiver.script(Reply.json({}, status=500))

        # Create a webhook for agent events only: its secret is shown once.
        await page.click("nav >> text=Webhooks")
        form = "#create-webhook"
        await page.fill(f"{form} input[name=url]", receiver.url("/parley-events"))
        for name in ("conversation.started", "conversation.ended"):
            await page.uncheck(f"{form} input[name=event_types][value='{name}']")
        await page.fill(f"{form} input[name=description]", "CRM sync")
        await page.click("#create-webhook-button")
        secret = await page.inner_text("#new-webhook-secret")
        assert secret.startswith("whsec_")
        table = await page.inner_text("#webhooks")
        assert "/parley-events" in table
        assert "agent.created" in table
        assert "conversation.started" not in table
        await shot(page, "webhooks")

        # An agent event fails at the receiver twice: the delivery is failed, with a button.
        await page.click("nav >> text=Agents")
        await page.fill("#create-agent input[name=name]", "sales")
        await page.click("text=Create agent")
        await page.wait_for_selector("text=Agent created.")
        await page.click("nav >> text=Webhooks")
        await page.click("#webhooks >> text=/parley-events")
        await reload_until(page, "#deliveries", "failed")
        assert secret not in await page.content()
        rows = await page.inner_text("#deliveries")
        assert "agent.created" in rows
        assert "500" in rows
        await shot(page, "webhook")

        # Send it again, now that the receiver answers 200: delivered.
        receiver.script(Reply.json({}))
        await page.click("#deliveries >> text=Send again")
        await page.wait_for_selector("text=Delivery sent again.")
        await reload_until(page, "#deliveries", "delivered")
        assert "Send again" not in await page.inner_text("#deliveries")
        assert len(receiver.requests) == 3
    assert errors == []


LOADED_METADATA = """audio => new Promise((resolve, reject) => {
  audio.addEventListener('loadedmetadata', () => resolve(audio.duration), {once: true});
  audio.addEventListener('error', () => reject(new Error('audio error ' + audio.error.code)));
  audio.preload = 'metadata';  // the page says "none": nothing loads before play
  audio.load();
})"""


@pytest.mark.timeout(60)
async def test_dashboard_conversation_recording_loads_in_chromium(
    settings_factory: Any, chromium: Browser, tmp_path: Path
) -> None:
    port = free_port()  # the signed URL names PARLEY_PUBLIC_URL: this very server
    settings = settings_factory(
        public_url=f"http://127.0.0.1:{port}", recordings_dir=tmp_path / "recordings"
    )
    application = create_app(settings)
    async with (
        application.router.lifespan_context(application),
        serving(application, port) as server,
    ):
        ctx = application.state.context
        created = await make_org(ctx, "records")
        org_id = created.org.id
        await factories.make_agent(ctx, org_id, name="support")
        await conversations.start_live(
            ctx, org_id=org_id, conversation_id="call-7", create_if_missing=True,
            agent="support", project=None, end_user=None,
        )  # fmt: skip

        async def render() -> bytes:
            return wav_bytes(seconds=0.5)

        assert await recordings.keep(ctx, org_id=org_id, conversation_id="call-7", render=render)
        await endings.end_conversation(
            ctx, org_id=org_id, conversation_id="call-7", ending=endings.CLIENT_CLOSED
        )
        page = await chromium.new_page()
        refused: list[str] = []
        page.on("console", lambda m: refused.append(m.text) if m.type == "error" else None)
        await sign_in(page, server, created.api_key.secret)
        await page.goto(f"{server.http}/dashboard/conversations/call-7")

        duration = await page.eval_on_selector("#recording-audio", LOADED_METADATA)

        assert duration == pytest.approx(0.5, abs=0.01)
        assert refused == []  # no Content-Security-Policy refusal, no failed load
