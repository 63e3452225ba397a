"""The agent page's "Call a number" (API.md section 15) and the voicemail message field: a
call placed from the dashboard through the simulated carrier's REST API, its refusals shown
beside the form with nothing stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from parley.config import Settings
from tests.carrier_api import CarrierApi, Failure
from tests.carrier_calls import Failed
from tests.types import MakeAgent, Tenant
from tests.web.helpers import Browser, form_values, text_of
from tests.web.test_agent_tools_form import signed_in

pytestmark = pytest.mark.anyio

NUMBERS = ["+16505550100", "+16505550101"]


@pytest.fixture
async def carrier() -> AsyncIterator[CarrierApi]:
    async with CarrierApi() as api:
        yield api


@pytest.fixture
def settings(settings_factory: Any, carrier: CarrierApi) -> Settings:
    # The carrier's callbacks go to a closed port: the call is placed, nothing answers it.
    built: Settings = settings_factory(public_url="http://127.0.0.1:9", twilio_api_url=carrier.url)
    return built


async def connect(tenant: Tenant, carrier: CarrierApi) -> None:
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    assert (await tenant.client.put("/v1/telephony/twilio", json=body)).status_code == 200


async def test_agent_page_call_a_number_places_the_call_and_shows_its_conversation(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    agent = await make_agent(tenant, phone_numbers=NUMBERS)
    await connect(tenant, carrier)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    assert form_values(page.text, "call-number")["from_phone_number"] == NUMBERS[0]
    carrier.script(Failed())

    response = await browser.post(
        f"/dashboard/agents/{agent['id']}/call",
        {"to_phone_number": "+14155550123", "from_phone_number": NUMBERS[1]},
    )

    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith("/dashboard/conversations/conv_")
    assert location.endswith("?done=call_placed")
    call = await carrier.wait_call()
    assert (call.field("To"), call.field("From")) == ("+14155550123", NUMBERS[1])
    shown = await browser.http.get(location)
    assert "Call placed" in shown.text
    assert text_of(shown.text, "call-info").startswith("outbound: +16505550101 → +14155550123")


@pytest.mark.parametrize(
    ("to", "field"),
    [("4155550123", "to_phone_number"), ("", "to_phone_number")],
    ids=["not_e164", "empty"],
)
async def test_agent_page_call_a_bad_number_400_beside_the_field(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, carrier: CarrierApi, to: str,
    field: str,
) -> None:  # fmt: skip
    agent = await make_agent(tenant, phone_numbers=NUMBERS)
    await connect(tenant, carrier)
    await signed_in(browser, tenant)

    response = await browser.post(f"/dashboard/agents/{agent['id']}/call", {"to_phone_number": to})

    assert response.status_code == 400
    assert text_of(response.text, f"call-number-{field}-error")
    assert carrier.requests == []
    assert (await tenant.client.get("/v1/conversations")).json()["conversations"] == []


async def test_agent_page_call_without_carrier_account_409_and_carrier_refusal_502_shown(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    agent = await make_agent(tenant, phone_numbers=NUMBERS)
    await signed_in(browser, tenant)
    path, to = f"/dashboard/agents/{agent['id']}/call", {"to_phone_number": "+14155550123"}

    refused = await browser.post(path, to)

    assert refused.status_code == 409
    assert "No carrier account" in refused.text
    await connect(tenant, carrier)
    carrier.fail_next(Failure.twilio(400, 21215, "Geo permission denied for this number."))
    failed = await browser.post(path, to)
    assert failed.status_code == 502
    assert "Geo permission denied for this number." in failed.text
    assert form_values(failed.text, "call-number")["to_phone_number"] == "+14155550123"


async def test_agent_page_without_numbers_or_disabled_offers_no_call(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    plain = await make_agent(tenant)
    disabled = await make_agent(tenant, phone_numbers=NUMBERS)
    await tenant.client.post(f"/v1/agents/{disabled['id']}/disable")
    await signed_in(browser, tenant)
    for agent in (plain, disabled):
        page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
        assert 'id="call-number"' not in page.text


async def test_agent_form_sets_and_clears_the_voicemail_message(
    tenant: Tenant, browser: Browser, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    await signed_in(browser, tenant)
    page = await browser.http.get(f"/dashboard/agents/{agent['id']}")
    shown = form_values(page.text, "edit-agent")
    path = f"/dashboard/agents/{agent['id']}"
    base = {**shown, "variable_name": [], "variable_default": []}

    saved = await browser.post(path, {**base, "voicemail_message": "Please call us back."})

    assert saved.status_code == 303, saved.text
    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert after["voicemail_message"] == "Please call us back."
    cleared = await browser.post(path, {**base, "voicemail_message": ""})
    assert cleared.status_code == 303, cleared.text
    after = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert after["voicemail_message"] is None
