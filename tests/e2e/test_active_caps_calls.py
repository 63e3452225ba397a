"""Phone calls under the caps on active conversations (API.md section 17), end to end over
real uvicorn with the simulated carrier (tests/carrier_api.py): a placed call counts from
its placement, so one past the cap is 429 `too_many_active_conversations` (with
Retry-After) and places nothing; cancelling the first gives its place back."""

from __future__ import annotations

import asyncio

import pytest

from tests.api.helpers import assert_error
from tests.carrier_calls import Busy, Person
from tests.e2e.test_outbound_calls import (
    Office,
    carrier,
    office,
    office_app,
    office_settings,
)

__all__ = ["carrier", "office", "office_app", "office_settings"]  # a placed call's fixtures

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_outbound_call_past_workspace_cap_429_places_nothing_until_one_ends(
    office: Office,
) -> None:
    capped = await office.api.patch("/v1/workspace", json={"max_active_conversations": 1})
    assert capped.status_code == 200, capped.text
    office.carrier.script(Person(ring_s=30.0), Busy())
    conversation_id, _call = await office.placed()  # ringing: active from its placement
    await asyncio.sleep(0.3)  # ringing at the carrier
    refused = await office.place()
    assert_error(refused, 429, "too_many_active_conversations")
    assert int(refused.headers["Retry-After"]) >= 1
    assert len(office.carrier.calls) == 1  # the carrier was not asked
    listed = (await office.api.get("/v1/conversations")).json()["conversations"]
    assert [c["id"] for c in listed] == [conversation_id]
    assert (await office.api.get("/v1/workspace")).json()["active_conversations"] == 1
    cancelled = await office.api.post(f"/v1/conversations/{conversation_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    await office.until_ended(conversation_id, within=10)
    placed = await office.place()
    assert placed.status_code == 200, placed.text
    await office.carrier.wait_call(1)
    await office.until_ended(placed.json()["conversation_id"], within=10)  # busy
    await asyncio.sleep(0)  # the ending's release runs after its commit
    assert (await office.api.get("/v1/workspace")).json()["active_conversations"] == 0
