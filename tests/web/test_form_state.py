"""A refused dashboard form comes back with what was typed and the error beside it
(web/form_state.py): every form whose input can be refused, over the real app."""

from __future__ import annotations

from typing import Any

import pytest

from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, form_values, text_of

pytestmark = pytest.mark.anyio

BAD_PEM = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAnotakeyatall\n-----END PUBLIC KEY-----"


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def agent_names(tenant: Tenant) -> list[str]:
    return [a["name"] for a in (await tenant.client.get("/v1/agents")).json()["agents"]]


async def test_create_agent_invalid_name_form_kept_error_beside_name(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    typed = {
        "name": "Support Desk!",
        "project": "main",
        "voice_id": "uk_male",
        "system_prompt": "You help with <orders>.\nBe brief.",
        "welcome_message": "Hello!",
        "audio_format": "pcm_8000",
        "phone_numbers": "+14155550100",
        "boosted_keywords": "Acme, Inc.\nParley",
    }

    response = await browser.post("/dashboard/agents", typed)

    assert response.status_code == 400
    kept = form_values(response.text, "create-agent")
    assert {name: kept[name] for name in typed} == typed
    untyped = {name: kept[name] for name in set(kept) - set(typed)}
    assert set(untyped) == {  # a blank template variable row, silence, voicemail
        "variable_name",
        "variable_default",
        "no_input_poke_sec",
        "no_input_poke_text",
        "no_input_end_conversation_sec",
        "voicemail_message",
    }
    assert untyped["no_input_poke_sec"] == untyped["no_input_end_conversation_sec"] == ""
    assert "a-z" in text_of(response.text, "create-agent-name-error")
    assert "validation_error" in text_of(response.text, "create-agent-error")
    assert "<h1>Agents</h1>" in response.text  # the page itself, not an error page
    assert await agent_names(tenant) == []


async def test_create_agent_name_taken_form_kept(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, name="support")
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/agents", {"name": "support", "system_prompt": "Second try."}
    )

    assert response.status_code == 409
    assert form_values(response.text, "create-agent")["system_prompt"] == "Second try."
    assert "name_taken" in text_of(response.text, "create-agent-error")
    assert await agent_names(tenant) == ["support"]


async def test_create_agent_unknown_project_form_kept(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/agents", {"name": "sales", "project": "mian"})

    assert response.status_code == 404
    kept = form_values(response.text, "create-agent")
    assert (kept["name"], kept["project"]) == ("sales", "mian")
    assert "project_not_found" in text_of(response.text, "create-agent-error")


async def test_edit_agent_invalid_phone_number_form_kept_agent_unchanged(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, system_prompt="Original.")
    await signed_in(browser, tenant)

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}",
        {"name": agent["name"], "voice_id": "uk_male", "system_prompt": "Edited.",
         "phone_numbers": "555-0100"},
    )  # fmt: skip

    assert response.status_code == 400
    kept = form_values(response.text, "edit-agent")
    assert (kept["system_prompt"], kept["phone_numbers"], kept["voice_id"]) == (
        "Edited.",
        "555-0100",
        "uk_male",
    )
    assert "E.164" in text_of(response.text, "edit-agent-phone_numbers-error")
    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert after["system_prompt"] == "Original."


async def test_edit_disabled_agent_form_kept_with_agent_disabled(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{agent['id']}/disable")
    await signed_in(browser, tenant)

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}",
        {"name": agent["name"], "voice_id": "us_female", "system_prompt": "Typed while off."},
    )

    assert response.status_code == 409
    assert form_values(response.text, "edit-agent")["system_prompt"] == "Typed while off."
    assert "agent_disabled" in text_of(response.text, "edit-agent-error")


async def test_release_numbers_without_choice_shown_again(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, phone_numbers=["+14155550100"])
    await signed_in(browser, tenant)

    response = await browser.post(f"/dashboard/agents/{agent['id']}/release")

    assert response.status_code == 400
    assert "choose the numbers" in text_of(response.text, "release-numbers-phone_numbers-error")
    assert form_values(response.text, "edit-agent")["name"] == agent["name"]


async def test_jwt_settings_bad_pem_form_kept_error_beside_keys(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)
    typed = {
        "issuers": "https://auth.acme.example\nhttps://staging.acme.example",
        "audience": "voice.acme.example",
        "source": "static",
        "jwks_url": "",
        "public_keys": BAD_PEM,
        "require_jti": "on",
    }

    response = await browser.post("/dashboard/jwt", typed)

    assert response.status_code == 400
    assert form_values(response.text, "jwt-settings") == typed
    assert "key 1:" in text_of(response.text, "jwt-settings-public_keys-error")
    assert "key_rejected" in text_of(response.text, "jwt-settings-error")
    shown = (await tenant.client.get("/v1/auth/jwt")).json()
    assert shown["issuers"] == []


async def test_jwt_settings_refused_jwks_url_form_kept(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    typed = {"issuers": "https://auth.acme.example", "audience": "", "source": "jwks",
             "jwks_url": "http://127.0.0.1:9/jwks.json", "public_keys": ""}  # fmt: skip

    response = await browser.post("/dashboard/jwt", typed)

    assert response.status_code == 400
    assert form_values(response.text, "jwt-settings") == typed
    problem = text_of(response.text, "jwt-settings-error")
    assert "jwks_unreachable" in problem
    assert "PARLEY_JWKS_ALLOW_HTTP" in problem


async def test_token_check_refused_token_not_typed_back(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    oversized = "eyJ" + "A" * 70_000

    response = await browser.post(
        "/dashboard/jwt/check", {"token": oversized, "conversation_id": "order-42"}
    )

    assert response.status_code == 400
    kept = form_values(response.text, "token-check")
    assert kept == {"token": "", "conversation_id": "order-42"}
    assert "at most" in text_of(response.text, "token-check-token-error")
    assert "A" * 100 not in response.text


async def test_create_api_key_long_name_form_kept(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)
    name = "n" * 101

    response = await browser.post("/dashboard/api-keys", {"name": name})

    assert response.status_code == 400
    assert form_values(response.text, "create-key-form") == {"name": name}
    assert "at most 100" in text_of(response.text, "create-key-form-name-error")
    assert len((await tenant.client.get("/v1/api_keys")).json()["api_keys"]) == 1


@pytest.mark.parametrize(
    ("typed", "field"),
    [
        ({"ttl_seconds": "5", "conversation_ids": "order-1\norder-2"}, "ttl_seconds"),
        ({"ttl_seconds": "ten", "conversation_ids": ""}, "ttl_seconds"),
        ({"ttl_seconds": "300", "conversation_ids": "order 1"}, "conversation_ids"),
    ],
    ids=["ttl-too-short", "ttl-not-a-number", "bad-conversation-id"],
)
async def test_create_session_token_refused_form_kept(
    tenant: Tenant, browser: Browser, typed: dict[str, str], field: str
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/session-tokens", typed)

    assert response.status_code == 400
    assert form_values(response.text, "create-token-form") == typed
    assert text_of(response.text, f"create-token-form-{field}-error")
    assert 'id="new-token"' not in response.text


async def test_pages_without_refusal_show_no_form_error(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await signed_in(browser, tenant)
    pages: list[Any] = [
        await browser.http.get(path)
        for path in ["/dashboard/agents", f"/dashboard/agents/{agent['id']}", "/dashboard/jwt",
                     "/dashboard/api-keys", "/dashboard/session-tokens"]
    ]  # fmt: skip

    for page in pages:
        assert page.status_code == 200
        assert "form-error" not in page.text
        assert "aria-invalid" not in page.text
    assert form_values(pages[1].text, "edit-agent")["name"] == agent["name"]


async def test_jwt_settings_static_keys_prefilled_so_saving_unchanged_keeps_them(
    tenant: Tenant, browser: Browser
) -> None:
    from parley.jwt import generate_key_pair

    pair = generate_key_pair("EdDSA", kid="static-1")
    registered = await tenant.client.put(
        "/v1/auth/jwt", json={"issuers": ["https://auth.acme.example"], "public_keys": [pair.jwks]}
    )
    assert registered.status_code == 200, registered.text
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/jwt")
    shown = form_values(page.text, "jwt-settings")
    assert '"kid": "static-1"' in shown["public_keys"]

    response = await browser.post("/dashboard/jwt", {**shown, "audience": "voice.acme.example"})

    assert response.status_code == 303, response.text
    saved = (await tenant.client.get("/v1/auth/jwt")).json()
    assert saved["audience"] == "voice.acme.example"
    assert [key["kid"] for key in saved["keys"]] == ["static-1"]
