"""The dashboard's phone page (API.md sections 10 and 13) over the real app: the voice URL,
set, replace and delete the Twilio account (the auth token never shown nor typed back), the
agents' numbers, CSRF and refused forms."""

from __future__ import annotations

from typing import Any

import pytest

from parley.config import Settings
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, form_values, text_of

pytestmark = pytest.mark.anyio

SID = "AC" + "0123456789abcdef" * 2
TOKEN = "f" * 28 + "9a3c"
OTHER_TOKEN = "e" * 28 + "77b1"
PUBLIC_URL = "http://voice.example.com:8000"  # http: the test client sends no Secure cookie


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(public_url=PUBLIC_URL)
    return built


async def signed_in(browser: Browser, tenant: Tenant) -> Browser:
    response = await browser.sign_in(tenant.api_key)
    assert response.status_code == 303, response.text
    return browser


async def stored_account(tenant: Tenant) -> dict[str, Any] | None:
    response = await tenant.client.get("/v1/telephony/twilio")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    account: dict[str, Any] = response.json()
    return account


# --- the page ---------------------------------------------------------------------------


async def test_phone_page_without_account_shows_voice_url_and_where_to_paste_it(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    page = await browser.http.get("/dashboard/phone")

    assert page.status_code == 200
    assert text_of(page.text, "voice-url") == PUBLIC_URL + "/v1/telephony/twilio/voice"
    assert "voice webhook" in text_of(page.text, "voice-url-where")
    assert "No account is set" in text_of(page.text, "twilio-account-facts")
    assert form_values(page.text, "twilio-account") == {"account_sid": "", "auth_token": ""}
    assert 'id="delete-twilio-account"' not in page.text
    assert '<a href="/dashboard/phone">Phone</a>' in page.text  # in the nav


async def test_phone_page_without_session_redirects_to_sign_in(browser: Browser) -> None:
    response = await browser.http.get("/dashboard/phone")

    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/sign-in"


async def test_phone_page_lists_each_number_with_the_agent_it_reaches(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await tenant.client.put("/v1/telephony/twilio", json={"account_sid": SID, "auth_token": TOKEN})
    support = await make_agent(tenant, name="support", phone_numbers=["+14155550123"])
    sales = await make_agent(tenant, name="sales", phone_numbers=["+14155550100", "+442071838750"])
    await tenant.client.post(f"/v1/agents/{sales['id']}/disable")
    await signed_in(browser, tenant)

    page = await browser.http.get("/dashboard/phone")

    rows = text_of(page.text, "phone-numbers")
    assert rows.index("+14155550100") < rows.index("+14155550123") < rows.index("+442071838750")
    assert f'href="/dashboard/agents/{support["id"]}">support</a>' in page.text
    assert page.text.count(f'href="/dashboard/agents/{sales["id"]}">sales</a>') == 2
    assert rows.count("refused: agent disabled") == 2
    assert rows.count("answered") == 1


async def test_phone_page_without_account_numbers_refused(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, phone_numbers=["+14155550123"])
    await signed_in(browser, tenant)

    page = await browser.http.get("/dashboard/phone")

    assert "refused: no account" in text_of(page.text, "phone-numbers")


# --- set, replace, delete ---------------------------------------------------------------


async def test_set_twilio_account_shows_sid_and_last4_never_the_token(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/phone", {"account_sid": SID, "auth_token": TOKEN})

    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/dashboard/phone?done=phone_saved"
    stored = await stored_account(tenant)
    assert stored is not None
    assert (stored["account_sid"], stored["auth_token_last4"]) == (SID, "9a3c")
    page = await browser.http.get(response.headers["location"])
    facts = text_of(page.text, "twilio-account-facts")
    assert SID in facts
    assert "••••9a3c" in facts
    assert "UTC" in facts  # updated_at
    assert TOKEN not in page.text
    assert form_values(page.text, "twilio-account") == {"account_sid": SID, "auth_token": ""}
    assert "Twilio account saved" in page.text


async def test_set_twilio_account_again_replaces_it(tenant: Tenant, browser: Browser) -> None:
    await tenant.client.put("/v1/telephony/twilio", json={"account_sid": SID, "auth_token": TOKEN})
    await signed_in(browser, tenant)
    other_sid = "AC" + "fedcba9876543210" * 2

    response = await browser.post(
        "/dashboard/phone", {"account_sid": other_sid, "auth_token": OTHER_TOKEN}
    )

    assert response.status_code == 303, response.text
    stored = await stored_account(tenant)
    assert stored is not None
    assert (stored["account_sid"], stored["auth_token_last4"]) == (other_sid, "77b1")


async def test_set_twilio_account_malformed_errors_by_field_token_not_typed_back(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post(
        "/dashboard/phone", {"account_sid": "AC-not-a-sid", "auth_token": TOKEN + "00"}
    )

    assert response.status_code == 400
    assert "validation_error" in text_of(response.text, "twilio-account-error")
    assert "32 hexadecimal" in text_of(response.text, "twilio-account-account_sid-error")
    assert "32 hexadecimal" in text_of(response.text, "twilio-account-auth_token-error")
    kept = form_values(response.text, "twilio-account")
    assert kept == {"account_sid": "AC-not-a-sid", "auth_token": ""}
    assert TOKEN not in response.text
    assert "<h1>Phone</h1>" in response.text
    assert await stored_account(tenant) is None


async def test_set_twilio_account_bad_sid_keeps_the_typed_token_out_of_the_page(
    tenant: Tenant, browser: Browser
) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/phone", {"account_sid": "AC12", "auth_token": TOKEN})

    assert response.status_code == 400
    assert text_of(response.text, "twilio-account-account_sid-error")
    assert not text_of(response.text, "twilio-account-auth_token-error")
    assert TOKEN not in response.text
    assert "9a3c" not in response.text


async def test_set_twilio_account_sid_of_another_org_409_form_kept(
    tenant: Tenant, other_tenant: Tenant, browser: Browser
) -> None:
    taken = await other_tenant.client.put(
        "/v1/telephony/twilio", json={"account_sid": SID, "auth_token": OTHER_TOKEN}
    )
    assert taken.status_code == 200, taken.text
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/phone", {"account_sid": SID, "auth_token": TOKEN})

    assert response.status_code == 409
    assert "account_taken" in text_of(response.text, "twilio-account-error")
    assert form_values(response.text, "twilio-account") == {"account_sid": SID, "auth_token": ""}
    assert "77b1" not in response.text  # nothing of the other organization's account
    assert await stored_account(tenant) is None


async def test_delete_twilio_account_forgets_it(tenant: Tenant, browser: Browser) -> None:
    await tenant.client.put("/v1/telephony/twilio", json={"account_sid": SID, "auth_token": TOKEN})
    await signed_in(browser, tenant)
    page = await browser.http.get("/dashboard/phone")
    assert 'id="delete-twilio-account"' in page.text

    response = await browser.post("/dashboard/phone/delete")

    assert response.status_code == 303
    assert response.headers["location"] == "/dashboard/phone?done=phone_deleted"
    assert await stored_account(tenant) is None
    after = await browser.http.get("/dashboard/phone")
    assert "No account is set" in text_of(after.text, "twilio-account-facts")


async def test_delete_twilio_account_when_none_404_page(tenant: Tenant, browser: Browser) -> None:
    await signed_in(browser, tenant)

    response = await browser.post("/dashboard/phone/delete")

    assert response.status_code == 404
    assert "telephony_not_configured" in response.text


# --- attacks ----------------------------------------------------------------------------


async def test_phone_forms_without_csrf_token_refused_nothing_changed(
    tenant: Tenant, browser: Browser
) -> None:
    await tenant.client.put("/v1/telephony/twilio", json={"account_sid": SID, "auth_token": TOKEN})
    await signed_in(browser, tenant)
    forged = {"account_sid": "AC" + "1" * 32, "auth_token": OTHER_TOKEN}

    for path, data in [("/dashboard/phone", forged), ("/dashboard/phone/delete", {})]:
        for token in [None, "0" * 64]:
            sent = data if token is None else {**data, "csrf_token": token}
            response = await browser.http.post(path, data=sent)
            assert response.status_code == 403, (path, token)
            assert "csrf_failed" in response.text

    stored = await stored_account(tenant)
    assert stored is not None
    assert (stored["account_sid"], stored["auth_token_last4"]) == (SID, "9a3c")
