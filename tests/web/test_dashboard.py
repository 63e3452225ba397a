"""The dashboard over the real app: sessions, CSRF, headers, and one named test per attack."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from sqlalchemy import text

from parley.app import create_app
from parley.db.engine import create_engine
from parley.jwt import generate_key_pair, import_jwk
from tests.jwt.kit import FrozenClock
from tests.types import MakeAgent, Tenant
from tests.web.conftest import MakeBrowser
from tests.web.helpers import Browser, csrf_of

pytestmark = pytest.mark.anyio

PAGES = [
    "/dashboard/agents",
    "/dashboard/tools",
    "/dashboard/jwt",
    "/dashboard/api-keys",
    "/dashboard/session-tokens",
    "/dashboard/conversations",
    "/dashboard/activity",
]


async def sql(database_url: str, statement: str, **params: Any) -> list[Any]:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


def session_cookie(response: httpx.Response) -> str:
    header = next(v for v in response.headers.get_list("set-cookie") if "parley_dashboard=" in v)
    return header


# --- sessions -------------------------------------------------------------------------


async def test_sign_in_sets_strict_httponly_cookie(tenant: Tenant, browser: Browser) -> None:
    response = await browser.sign_in(tenant.api_key)

    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/agents"
    cookie = session_cookie(response)
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/dashboard" in cookie
    assert "Secure" not in cookie  # the public URL of these tests is http


async def test_sign_in_cookie_secure_when_public_url_https(
    settings_factory: Any, tenant: Tenant
) -> None:
    application = create_app(settings_factory(public_url="https://parley.example"))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="https://testserver") as http:
            response = await Browser(http).sign_in(tenant.api_key)

    assert response.status_code == 303, response.text
    assert "Secure" in session_cookie(response)


async def test_session_id_stored_only_as_hash(
    tenant: Tenant, browser: Browser, database_url: str
) -> None:
    await signed_in(browser, tenant)
    session_id = browser.http.cookies["parley_dashboard"]

    rows = await sql(database_url, "SELECT id_hash FROM dashboard_sessions")

    assert [row[0] for row in rows] == [hashlib.sha256(session_id.encode()).hexdigest()]


async def test_pages_never_show_the_api_key_after_sign_in(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    for path in PAGES:
        page = await browser.http.get(path)
        assert page.status_code == 200, (path, page.text)
        assert tenant.api_key not in page.text


async def test_pages_without_session_redirect_to_sign_in(browser: Browser) -> None:
    for path in PAGES:
        response = await browser.http.get(path)
        assert response.status_code == 303
        assert response.headers["location"] == "/dashboard/sign-in"


async def test_sign_in_wrong_key_401_page(browser: Browser) -> None:
    response = await browser.sign_in("parley_sk_" + "x" * 43)

    assert response.status_code == 401
    assert "does not open the dashboard" in response.text
    assert "parley_dashboard=" not in response.headers.get("set-cookie", "")


async def test_sign_out_ends_the_server_session(
    tenant: Tenant, browser: Browser, database_url: str
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/sign-out")

    assert response.status_code == 303
    [(ended,)] = await sql(database_url, "SELECT ended_at FROM dashboard_sessions")
    assert ended is not None


async def test_revoking_the_api_key_ends_its_sessions(
    tenant: Tenant, make_browser: MakeBrowser
) -> None:
    created = (await tenant.client.post("/v1/api_keys", json={"name": "temp"})).json()
    browser = await make_browser()
    await browser.sign_in(created["secret"])
    assert (await browser.http.get("/dashboard/agents")).status_code == 200

    await tenant.client.delete(f"/v1/api_keys/{created['id']}")

    response = await browser.http.get("/dashboard/agents")
    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"


async def test_session_idle_and_absolute_expiry(settings_factory: Any, tenant: Tenant) -> None:
    clock = FrozenClock(2_000_000_000)
    application = create_app(settings_factory(), clock=clock)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            browser = Browser(http)
            await browser.sign_in(tenant.api_key)
            for _ in range(30):  # active every 29 minutes: alive past 12 h? no, 12 h ends it
                clock.advance(29 * 60)
                alive = (await http.get("/dashboard/agents")).status_code == 200
                if clock.now - 2_000_000_000 < 12 * 3600:
                    assert alive
                else:
                    assert not alive
            await browser.sign_in(tenant.api_key)
            clock.advance(31 * 60)
            assert (await http.get("/dashboard/agents")).status_code == 303


# --- the activity page and the services -----------------------------------------------


async def test_dashboard_changes_recorded_with_dashboard_actor(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    created = await browser.post("/dashboard/agents", {"name": "from-page"})
    agent_path = created.headers["location"].split("?")[0]
    await browser.post(f"{agent_path}/disable")

    activity = (await browser.http.get("/dashboard/activity")).text
    events = (await tenant.client.get("/v1/audit_events")).json()["audit_events"]

    assert [e["action"] for e in events[:3]] == [
        "agent.disable",
        "agent.create",
        "dashboard.sign_in",
    ]
    assert all(e["actor"]["kind"] == "dashboard" for e in events[:3])
    assert activity.index("agent.disable") < activity.index("agent.create")


async def test_editing_disabled_agent_shows_agent_disabled(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
    await signed_in(browser, tenant)

    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    response = await browser.http.post(
        f"/dashboard/agents/{agent['id']}",
        data={"csrf_token": csrf_of(page.text), "name": agent["name"], "voice_id": "other"},
    )

    assert "disabled" in page.text
    assert response.status_code == 409
    assert "agent_disabled" in response.text
    assert "The agent is disabled: it cannot be updated." in response.text
    unchanged = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert unchanged["voice_id"] == agent["voice_id"]


async def test_failed_sign_in_with_revoked_key_is_recorded(
    tenant: Tenant, browser: Browser
) -> None:
    created = (await tenant.client.post("/v1/api_keys", json={"name": "old"})).json()
    await tenant.client.delete(f"/v1/api_keys/{created['id']}")

    response = await browser.sign_in(created["secret"])

    assert response.status_code == 401
    [event] = (
        await tenant.client.get("/v1/audit_events", params={"action": "dashboard.sign_in_failed"})
    ).json()["audit_events"]
    assert event["target"] == created["id"]


# --- attacks --------------------------------------------------------------------------


async def test_csrf_token_missing_refused_nothing_changed(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)

    response = await browser.http.post("/dashboard/agents", data={"name": "forged"})

    assert response.status_code == 403
    assert "csrf_failed" in response.text
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_csrf_token_wrong_refused_nothing_changed(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await signed_in(browser, tenant)
    forged = "0" * 64

    for path in [f"/dashboard/agents/{agent['id']}/disable", "/dashboard/api-keys"]:
        response = await browser.http.post(path, data={"csrf_token": forged, "name": "x"})
        assert response.status_code == 403

    assert (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"][
        "is_disabled"
    ] is False
    assert len((await tenant.client.get("/v1/api_keys")).json()["api_keys"]) == 1


async def test_csrf_token_of_another_session_refused(
    tenant: Tenant, make_browser: MakeBrowser
) -> None:
    mine, theirs = await make_browser(), await make_browser()
    await signed_in(mine, tenant)
    await signed_in(theirs, tenant)
    their_token = await theirs.csrf()

    response = await mine.http.post(
        "/dashboard/agents", data={"csrf_token": their_token, "name": "crossed"}
    )

    assert response.status_code == 403
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_sign_in_form_without_its_token_refused(tenant: Tenant, browser: Browser) -> None:
    response = await browser.http.post("/dashboard/sign-in", data={"api_key": tenant.api_key})

    assert response.status_code == 403
    assert "parley_dashboard=" not in response.headers.get("set-cookie", "")


async def test_cross_origin_post_refused(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    token = await browser.csrf()

    response = await browser.http.post(
        "/dashboard/agents",
        data={"csrf_token": token, "name": "from-elsewhere"},
        headers={"Origin": "https://evil.example"},
    )

    assert response.status_code == 403
    assert (await tenant.client.get("/v1/agents")).json()["agents"] == []


async def test_session_cookie_replayed_after_sign_out_refused(
    tenant: Tenant, browser: Browser, make_browser: MakeBrowser
) -> None:
    await signed_in(browser, tenant)
    stolen = browser.http.cookies["parley_dashboard"]
    token = await browser.csrf()
    await browser.post("/dashboard/sign-out")

    replay = await make_browser()
    replay.http.cookies.set("parley_dashboard", stolen, path="/dashboard")
    page = await replay.http.get("/dashboard/api-keys")
    write = await replay.http.post("/dashboard/api-keys", data={"csrf_token": token})

    assert page.status_code == 303
    assert page.headers["location"] == "/dashboard/sign-in"
    assert write.status_code == 303
    assert len((await tenant.client.get("/v1/api_keys")).json()["api_keys"]) == 1


async def test_script_in_agent_name_prompt_and_jwks_error_rendered_inert(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, database_url: str
) -> None:
    payload = "<script>alert(1)</script>"
    agent = await make_agent(tenant, system_prompt=payload, welcome_message=payload)
    await signed_in(browser, tenant)
    named = await browser.post("/dashboard/agents", {"name": payload})
    await tenant.client.put(
        "/v1/auth/jwt",
        json={"issuers": ["https://x.example"], "public_keys": [_ed25519_pem()]},
    )
    await sql(
        database_url,
        "UPDATE jwt_configs SET jwks_url = :u, jwks_document_url = :u, jwks_error = :e, "
        "jwks_document = '{\"keys\": []}', jwks_fetched_at = 1.0, jwks_max_age = 600",
        u="https://x.example/jwks",
        e=payload,
    )
    pages = [
        named,
        await browser.http.get(f"/dashboard/agents/{agent['id']}"),
        await browser.http.get("/dashboard/jwt"),
        await browser.post(
            "/dashboard/jwt/check", {"token": "eyJhbGciOiJFZERTQSIsImtpZCI6IjxzY3JpcHQ+In0.e30.AA"}
        ),
    ]

    assert named.status_code == 400
    for page in pages:
        assert "<script" not in page.text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[1].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[2].text


def _ed25519_pem() -> str:
    """A public key as PEM, as an operator would paste it."""
    key = import_jwk(generate_key_pair("EdDSA").jwks["keys"][0]).public_key
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode()


async def test_dashboard_framing_refused_by_headers(tenant: Tenant, browser: Browser) -> None:
    sign_in = await browser.http.get("/dashboard/sign-in")
    await signed_in(browser, tenant)
    responses = [sign_in] + [await browser.http.get(path) for path in PAGES]
    responses.append(await browser.http.get("/dashboard/agents/agent_" + "0" * 32))

    for response in responses:
        assert response.headers["x-frame-options"] == "DENY"
        csp = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "script-src" not in csp
        assert "default-src 'none'" in csp
        assert "unsafe-inline" not in csp
        assert response.headers["referrer-policy"] == "same-origin"


async def test_hundred_wrong_keys_in_a_minute_get_429(tenant: Tenant, browser: Browser) -> None:
    statuses = []
    for n in range(100):
        response = await browser.sign_in(f"parley_sk_{n:043d}")
        statuses.append(response.status_code)
    right_key = await browser.sign_in(tenant.api_key)

    assert statuses[:10] == [401] * 10
    assert set(statuses[10:]) == {429}
    assert right_key.status_code == 429  # the address is blocked whatever it sends
    assert int(right_key.headers["retry-after"]) > 0
    assert "parley_dashboard=" not in right_key.headers.get("set-cookie", "")


async def test_other_org_session_reading_pages_by_id_refused(
    tenant: Tenant, other_tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    theirs = await make_agent(other_tenant, system_prompt="their secret prompt")
    conversation = (
        await other_tenant.client.post("/v1/conversations", json={"agent": theirs["id"]})
    ).json()["conversation"]
    their_key = (await other_tenant.client.get("/v1/api_keys")).json()["api_keys"][0]
    await signed_in(browser, tenant)

    agent_page = await browser.http.get(f"/dashboard/agents/{theirs['id']}")
    conversation_page = await browser.http.get(f"/dashboard/conversations/{conversation['id']}")
    writes = [
        await browser.post(f"/dashboard/agents/{theirs['id']}/disable"),
        await browser.post(f"/dashboard/conversations/{conversation['id']}/end"),
        await browser.post(f"/dashboard/api-keys/{their_key['id']}/revoke"),
    ]

    assert agent_page.status_code == 403
    assert conversation_page.status_code == 404
    assert [w.status_code for w in writes] == [403, 404, 403]
    for response in [agent_page, conversation_page, *writes]:
        assert theirs["name"] not in response.text
        assert "their secret prompt" not in response.text
    after = (await other_tenant.client.get(f"/v1/agents/{theirs['id']}")).json()["agent"]
    assert after["is_disabled"] is False
    assert (await other_tenant.client.get("/v1/api_keys")).status_code == 200


async def test_unknown_operation_404(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await signed_in(browser, tenant)
    response = await browser.post(f"/dashboard/agents/{agent['id']}/teleport")
    assert response.status_code == 404
    assert re.search(r"not_found", response.text)
