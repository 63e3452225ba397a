"""`POST /v1/conversations/outbound_call` and `…/cancel` (API.md section 15) through the API:
every refusal in the contract's order with nothing stored and nothing asked of the carrier,
the carrier's refusals and silence (502, the conversation ended `failed`: nothing stays
pending), the agent's `voicemail_message`, and the sweep of calls never connected. The
carrier is the simulated one's REST API on loopback (tests/carrier_api.py); its callbacks go
to a closed port here (the calls themselves are tests/e2e/test_outbound_calls.py's)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from tests.carrier_api import CarrierApi, Failure
from tests.carrier_calls import Failed
from tests.services.test_live_session import MovableClock
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.services import Context, outbound_calls

pytestmark = pytest.mark.anyio

CLOSED = "http://127.0.0.1:9"
"""PARLEY_PUBLIC_URL here: the simulated carrier's callbacks find nothing listening."""
TO = "+14155550123"
NUMBER = "+16505550100"


@pytest.fixture
async def carrier() -> AsyncIterator[CarrierApi]:
    async with CarrierApi() as api:
        yield api


@pytest.fixture
def settings(settings_factory: Any, carrier: CarrierApi) -> Settings:
    built: Settings = settings_factory(public_url=CLOSED, twilio_api_url=carrier.url)
    return built


async def connect_carrier(tenant: Tenant, carrier: CarrierApi) -> None:
    account = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    response = await tenant.client.put("/v1/telephony/twilio", json=account)
    assert response.status_code == 200, response.text


async def place(tenant: Tenant, to: str = TO, **config: Any) -> httpx.Response:
    body: dict[str, Any] = {"to_phone_number": to, "config": config}
    if "dry_run" in config:
        body["dry_run"] = config.pop("dry_run")
    return await tenant.client.post("/v1/conversations/outbound_call", json=body)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    """The answer's `error`, with its `param_errors` (beside it in the body) inside."""
    assert response.status_code == status, response.text
    body = response.json()
    error: dict[str, Any] = {**body["error"], "param_errors": body.get("param_errors", {})}
    return error


async def conversations_of(tenant: Tenant) -> list[dict[str, Any]]:
    response = await tenant.client.get("/v1/conversations")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["conversations"]
    return found


async def test_outbound_call_refusals_in_the_contracts_order_store_nothing(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    disabled = await make_agent(tenant)
    await tenant.client.post(f"/v1/agents/{disabled['name']}/disable")
    numberless = await make_agent(
        tenant,
        welcome_message="Hi {{name}}.",
        template_variables={"name": {"default_value": "you"}},
    )
    agent = await make_agent(
        tenant,
        phone_numbers=[NUMBER],
        welcome_message="Hello {{name}}, about {{topic}}.",
        template_variables={"name": {"default_value": "there"}, "topic": {"default_value": ""}},
        system_prompt="Call about {{topic}}.",
    )
    # A bad number is refused before anything else is looked at, even an unknown agent.
    error = error_of(await place(tenant, to="4155550123", agent="nobody"), 400)
    assert (error["code"], list(error["param_errors"])) == ("validation_error", ["to_phone_number"])
    sdk_only = await place(tenant, agent=agent["name"], generate_welcome_message=True)
    assert "generate_welcome_message" in str(error_of(sdk_only, 400))
    assert error_of(await place(tenant, agent="nobody"), 404)["code"] == "agent_not_found"
    assert error_of(await place(tenant, agent=disabled["name"]), 409)["code"] == "agent_disabled"
    assert error_of(await place(tenant, agent=numberless["name"]), 400)["code"] == "no_phone_number"
    foreign = await place(tenant, agent=agent["name"], from_phone_number="+16505550199")
    assert error_of(foreign, 400)["code"] == "no_phone_number"
    # No carrier account: 409, before the template variables are looked at.
    missing = {"welcome_message": "Hi {{unknown}}"}
    error = error_of(await place(tenant, agent=agent["name"], **missing), 409)
    assert error["code"] == "telephony_not_configured"
    await connect_carrier(tenant, carrier)
    error = error_of(await place(tenant, agent=agent["name"], **missing), 400)
    assert error["code"] == "missing_template_variable"
    voicemail = {"voicemail_message": "Call {{back_number}}"}
    error = error_of(await place(tenant, agent=agent["name"], **voicemail), 400)
    assert error["code"] == "missing_template_variable"
    unknown = await place(tenant, agent=agent["name"], tools=["no_such_tool"])
    assert error_of(unknown, 400)["code"] == "unknown_tool"
    voice = await place(tenant, agent=agent["name"], voice_id="no_such_voice")
    assert error_of(voice, 400)["code"] == "unknown_voice"
    out_of_range = await place(tenant, agent=agent["name"], no_input_poke_sec=0)
    assert error_of(out_of_range, 400)["code"] == "validation_error"
    assert await conversations_of(tenant) == []
    assert carrier.requests == []


async def test_outbound_call_dry_run_answers_the_same_refusals(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    agent = await make_agent(tenant, phone_numbers=[NUMBER])
    refused = await place(tenant, agent=agent["name"], dry_run=True)
    assert error_of(refused, 409)["code"] == "telephony_not_configured"
    await connect_carrier(tenant, carrier)
    response = await place(tenant, agent=agent["name"], dry_run=True)
    assert response.status_code == 200, response.text
    assert response.json() == {"conversation_id": None, "dry_run": True}
    assert await conversations_of(tenant) == []
    assert carrier.requests == []


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (
            Failure.twilio(400, 21211, "The 'To' number +14155550123 is not a valid phone number."),
            "error 21211): The 'To' number +14155550123 is not a valid phone number.",
        ),
        (Failure.server_error(), "HTTP 500"),
        (Failure.redirect("http://127.0.0.1:9/elsewhere"), "redirect"),
    ],
    ids=["refused", "500", "redirect"],
)
async def test_outbound_call_carrier_failure_is_502_and_nothing_stays_pending(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi, failure: Failure, said: str
) -> None:
    agent = await make_agent(tenant, phone_numbers=[NUMBER])
    await connect_carrier(tenant, carrier)
    carrier.fail_next(failure)
    error = error_of(await place(tenant, agent=agent["name"]), 502)
    assert error["code"] == "carrier_error"
    assert said in error["message"]
    assert carrier.auth_token not in error["message"]
    (stored,) = await conversations_of(tenant)
    assert (stored["status"], stored["ended_by"]) == ("ended", "failed")
    assert stored["call_info"]["direction"] == "outbound"
    assert stored["call_info"]["twilio_call_sid"] is None


async def test_outbound_call_carrier_silent_for_10_s_is_502_and_ended_failed(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    agent = await make_agent(tenant, phone_numbers=[NUMBER])
    await connect_carrier(tenant, carrier)
    carrier.fail_next(Failure.slow(11))  # it would answer 201 after 11 s
    error = error_of(await place(tenant, agent=agent["name"]), 502)
    # Parley gave up 10 s after the carrier had its request, by the carrier's clock (the
    # request's own database work before and after is not the carrier's wait).
    waited = await carrier.dropped()
    assert 9.9 <= waited < 11, waited
    assert error["code"] == "carrier_error"
    (stored,) = await conversations_of(tenant)
    assert (stored["status"], stored["ended_by"]) == ("ended", "failed")


async def test_outbound_call_placed_is_pending_with_its_call_sid_and_settings(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    agent = await make_agent(tenant, phone_numbers=["+16505550101", NUMBER])
    await connect_carrier(tenant, carrier)
    carrier.script(Failed())  # the carrier plays on; its callbacks find nothing listening
    response = await place(tenant, agent=agent["id"], from_phone_number=NUMBER)
    assert response.status_code == 200, response.text
    conversation_id = response.json()["conversation_id"]
    call = await carrier.wait_call()
    assert call.field("From") == NUMBER
    found = (await tenant.client.get(f"/v1/conversations/{conversation_id}")).json()
    assert found["conversation"]["status"] == "pending"
    assert found["conversation"]["call_info"] == {
        "direction": "outbound",
        "from_phone_number": NUMBER,
        "to_phone_number": TO,
        "twilio_call_sid": call.sid,
    }


async def test_outbound_calls_placed_at_once_each_pending_with_its_own_call_sid_cap_exact(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi
) -> None:
    """A burst of placements commits its conversations and SIDs in batches (`transact`):
    each placed call is its own pending conversation with its own SID, audited once, and a
    cap on active conversations is exact (the leases are taken before the batch)."""
    agent = await make_agent(tenant, phone_numbers=[NUMBER])
    await connect_carrier(tenant, carrier)
    capped = await tenant.client.patch("/v1/workspace", json={"max_active_conversations": 5})
    assert capped.status_code == 200, capped.text
    carrier.script(*(Failed() for _ in range(8)))

    answers = await asyncio.gather(
        *(place(tenant, to=f"+1415555{index:04d}", agent=agent["id"]) for index in range(8))
    )

    assert sorted(a.status_code for a in answers) == [200] * 5 + [429] * 3, answers
    placed = {a.json()["conversation_id"] for a in answers if a.status_code == 200}
    assert len(placed) == 5
    found = {c["id"]: c for c in await conversations_of(tenant)}
    assert set(found) == placed  # the refused ones stored nothing
    sids = {found[i]["call_info"]["twilio_call_sid"] for i in placed}
    assert len(sids) == 5
    assert sids == set(carrier.calls)
    params = {"action": "conversation.outbound_call"}
    audit = await tenant.client.get("/v1/audit_events", params=params)
    assert audit.status_code == 200, audit.text
    targets = [e["target"] for e in audit.json()["audit_events"]]
    assert sorted(targets) == sorted(placed)


async def test_outbound_call_cancel_of_unknown_conversation_404(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/conversations/conv_nothing_here/cancel")
    assert error_of(response, 404)["code"] == "conversation_not_found"


async def test_outbound_call_never_connected_ended_failed_by_the_sweep(
    tenant: Tenant, make_agent: MakeAgent, carrier: CarrierApi, ctx: Context
) -> None:
    agent = await make_agent(tenant, phone_numbers=[NUMBER])
    await connect_carrier(tenant, carrier)
    carrier.script(Failed())  # its callbacks find nothing listening: Parley hears nothing
    response = await place(tenant, agent=agent["name"])
    conversation_id = response.json()["conversation_id"]
    assert await outbound_calls.end_unconnected_calls(ctx) == 0  # just placed: it may ring
    clock = MovableClock()
    clock.ahead = outbound_calls.UNCONNECTED_SECONDS + 1
    assert await outbound_calls.end_unconnected_calls(dataclasses.replace(ctx, clock=clock)) == 1
    found = (await tenant.client.get(f"/v1/conversations/{conversation_id}")).json()
    assert (found["conversation"]["status"], found["conversation"]["ended_by"]) == (
        "ended",
        "failed",
    )


async def test_agent_voicemail_message_round_trips_and_is_checked(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, voicemail_message="Please call us back.")
    assert agent["voicemail_message"] == "Please call us back."
    too_long = await tenant.client.patch(
        f"/v1/agents/{agent['name']}", json={"voicemail_message": "x" * 2001}
    )
    assert error_of(too_long, 400)["param_errors"].keys() == {"voicemail_message"}
    cleared = await tenant.client.patch(
        f"/v1/agents/{agent['name']}", json={"voicemail_message": None}
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["agent"]["voicemail_message"] is None
    plain = await make_agent(tenant)
    assert plain["voicemail_message"] is None
