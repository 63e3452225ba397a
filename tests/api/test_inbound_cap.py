"""An inbound call under the caps on active conversations (API.md section 17): an answered
call counts from its answer, so a call past its project's cap is rejected busy
(`<Reject reason="busy"/>`) and makes no conversation; once one ends, calls are answered."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.carrier import SimulatedCarrier, Twiml
from tests.types import MakeAgent, Tenant

from parley.config import Settings

pytestmark = pytest.mark.anyio

PUBLIC_URL = "https://calls.example.com"
NUMBER = "+14155550123"


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(public_url=PUBLIC_URL, conversation_lease_seconds=3600)
    return built


@pytest.fixture
async def carrier(client: httpx.AsyncClient, tenant: Tenant) -> SimulatedCarrier:
    simulated = SimulatedCarrier(http=client, voice_url=f"{PUBLIC_URL}/v1/telephony/twilio/voice")
    body = {"account_sid": simulated.account_sid, "auth_token": simulated.auth_token}
    assert (await tenant.client.put("/v1/telephony/twilio", json=body)).status_code == 200
    return simulated


async def test_inbound_call_past_project_cap_rejected_busy_without_conversation(
    tenant: Tenant, carrier: SimulatedCarrier, make_agent: MakeAgent
) -> None:
    await make_agent(tenant, phone_numbers=[NUMBER])
    capped = await tenant.client.patch("/v1/projects/main", json={"max_active_conversations": 1})
    assert capped.status_code == 200, capped.text
    answered = await carrier.call(to=NUMBER)
    assert not answered.rejected
    assert (await carrier.call(to=NUMBER)) == Twiml(reject_reason="busy")
    listed = (await tenant.client.get("/v1/conversations")).json()["conversations"]
    assert len(listed) == 1
    project = (await tenant.client.get("/v1/projects/main")).json()["project"]
    assert project["active_conversations"] == 1
    ended = await tenant.client.post(f"/v1/conversations/{listed[0]['id']}/end")
    assert ended.status_code == 200, ended.text
    assert not (await carrier.call(to=NUMBER)).rejected
