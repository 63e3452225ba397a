"""An agent's delivery members (API.md section 17; services/delivery.py) over raw HTTP: their
defaults, a round trip through create, PATCH and read, each rule a 400 naming the member,
null where it means the default; and the SDK's agent members Parley does not have, each a
400 naming it "is not supported"."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from phonic.agents.client import AgentsClient
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

from parley.api.agent_sdk_schemas import UNSUPPORTED_AGENT_MEMBERS
from parley.api.schemas import AgentUpdate

pytestmark = pytest.mark.anyio

DEFAULTS: dict[str, Any] = {
    "generate_welcome_message": False,
    "is_welcome_message_interruptible": True,
    "audio_speed": 1.0,
    "timezone": None,
    "pronunciation_dictionary": [],
    "vad_min_silence_duration_ms": None,
    "vad_threshold": None,
}
CHOSEN: dict[str, Any] = {
    "generate_welcome_message": True,
    "is_welcome_message_interruptible": False,
    "audio_speed": 1.5,
    "timezone": "Europe/Berlin",
    "pronunciation_dictionary": [{"word": "Acme", "pronunciation": "Ack-mee"}],
    "vad_min_silence_duration_ms": 800,
    "vad_threshold": 0.6,
}
ABSENT_FEATURES: dict[str, Any] = {
    "additional_voice_ids": [],
    "background_noise_level": 0.0,
    "background_noise": None,
    "listen_only_inbound_enabled": False,
    "tasks": [],
    "generate_no_input_poke_text": False,
    "push_to_talk": False,
}


def delivery_of(agent: dict[str, Any]) -> dict[str, Any]:
    return {name: agent[name] for name in DEFAULTS}


async def test_agent_delivery_defaults_and_absent_features_shown(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    assert delivery_of(agent) == DEFAULTS
    assert {name: agent[name] for name in ABSENT_FEATURES} == ABSENT_FEATURES


async def test_agent_delivery_round_trips_through_create_patch_and_read(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, **CHOSEN)
    assert delivery_of(agent) == CHOSEN
    read = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert delivery_of(read) == CHOSEN

    patched = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"audio_speed": 2, "vad_threshold": None}
    )
    assert patched.status_code == 200, patched.text
    assert delivery_of(patched.json()["agent"]) == {
        **CHOSEN,
        "audio_speed": 2.0,
        "vad_threshold": None,
    }


async def test_agent_delivery_patch_null_is_the_default_for_timezone_and_vad(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant, **CHOSEN)
    nulls = {"timezone": None, "vad_min_silence_duration_ms": None, "vad_threshold": None}
    patched = await tenant.client.patch(f"/v1/agents/{agent['id']}", json=nulls)
    assert patched.status_code == 200, patched.text
    assert delivery_of(patched.json()["agent"]) == {**CHOSEN, **nulls}
    for member in ("generate_welcome_message", "is_welcome_message_interruptible", "audio_speed"):
        refused = await tenant.client.patch(f"/v1/agents/{agent['id']}", json={member: None})
        body = assert_error(refused, 400, "validation_error")
        assert body["param_errors"] == {member: "may not be null"}


OUT_OF_RULE: list[tuple[str, object]] = [
    ("audio_speed", 0.4),
    ("audio_speed", 2.01),
    ("audio_speed", "1.0"),
    ("timezone", "Mars/Olympus_Mons"),
    ("timezone", "europe/berlin"),
    ("vad_min_silence_duration_ms", 99),
    ("vad_min_silence_duration_ms", 5_001),
    ("vad_min_silence_duration_ms", 500.5),
    ("vad_threshold", 0.05),
    ("vad_threshold", 0.95),
    ("generate_welcome_message", "yes"),
    ("pronunciation_dictionary", [{"word": "Acme"}]),
    ("pronunciation_dictionary", [{"word": "", "pronunciation": "x"}]),
    (
        "pronunciation_dictionary",
        [{"word": "Acme", "pronunciation": "a"}, {"word": "ACME", "pronunciation": "b"}],
    ),
    ("pronunciation_dictionary", [{"word": f"w{i}", "pronunciation": "x"} for i in range(101)]),
]


async def test_agent_delivery_out_of_rule_400_naming_the_member(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    for member, value in OUT_OF_RULE:
        body = {"name": "tuned", member: value}
        for response in (
            await tenant.client.post("/v1/agents", json=body),
            await tenant.client.patch(f"/v1/agents/{agent['id']}", json={member: value}),
            await tenant.client.put("/v1/agents/upsert", json=body),
        ):
            errors = assert_error(response, 400, "validation_error")["param_errors"]
            assert any(key.split(".")[0] == member for key in errors), (member, value, errors)
    assert (await tenant.client.get("/v1/agents/tuned")).status_code == 404
    unchanged = (await tenant.client.get(f"/v1/agents/{agent['id']}")).json()["agent"]
    assert delivery_of(unchanged) == DEFAULTS


async def test_agent_sdk_member_without_the_feature_400_not_supported(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    for member in UNSUPPORTED_AGENT_MEMBERS:
        for value in (None, True):
            body = {"name": "extra", member: value}
            for response in (
                await tenant.client.post("/v1/agents", json=body),
                await tenant.client.patch(f"/v1/agents/{agent['id']}", json={member: value}),
                await tenant.client.put("/v1/agents/upsert", json=body),
            ):
                errors = assert_error(response, 400, "validation_error")["param_errors"]
                assert errors == {member: "is not supported: Parley does not have this feature"}


async def test_agent_unknown_member_still_not_a_known_field(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": "extra", "colour": "red"})
    errors = assert_error(response, 400, "validation_error")["param_errors"]
    assert errors == {"colour": "is not a known field"}


LEFT_TO_OTHER_PARTS = {
    "configuration_endpoint",  # the configuration endpoint's own part of section 17
    "min_words_to_interrupt",  # section 18's interruptions
    "built_in_tool_configs",  # the tools' part
}


def test_agent_sdk_members_each_honoured_refused_or_left_to_its_part() -> None:
    """Every member of the SDK's agents.create, update and upsert, introspected (a new SDK
    member cannot hide): a member the API takes, one refused as not supported, or one
    another part of the contract owns; never two of these."""
    members = {
        name
        for method in (AgentsClient.create, AgentsClient.update, AgentsClient.upsert)
        for name in inspect.signature(method).parameters
    } - {"self", "request_options", "name_or_id", "project"}
    refused = set(UNSUPPORTED_AGENT_MEMBERS)
    taken = set(AgentUpdate.model_fields) - refused
    assert members - taken - refused - LEFT_TO_OTHER_PARTS == set()
    assert taken & LEFT_TO_OTHER_PARTS <= {"configuration_endpoint"}
    assert set(DEFAULTS) <= taken
