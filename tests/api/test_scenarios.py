"""Test scenarios over REST (API.md section 19): the resource and its validation, on SQLite
and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio
SCENARIOS = "/v1/projects/main/test_scenarios"


def scenario(agent: str, /, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "greets",
        "agent": agent,
        "caller": {"lines": ["Hello there."]},
        "expect": {"transcript_contains": ["hello"], "ended_by": ["user"]},
    }
    body.update(overrides)
    return body


async def test_scenario_create_get_list_patch_delete(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = (await make_agent(tenant))["name"]
    created = await tenant.client.post(SCENARIOS, json=scenario(agent))
    assert created.status_code == 201, created.text
    made = created.json()["test_scenario"]
    assert made["id"].startswith("tscn_")
    assert made["transport"] == "websocket"
    assert made["caller"] == {"lines": ["Hello there."]}
    by_name = (await tenant.client.get(f"{SCENARIOS}/greets")).json()["test_scenario"]
    assert by_name == made
    assert (await tenant.client.get(SCENARIOS)).json()["test_scenarios"] == [made]
    patched = await tenant.client.patch(
        f"{SCENARIOS}/{made['id']}", json={"caller": {"goal": "Book a table.", "max_turns": 3}}
    )
    assert patched.json() == {"success": True}
    again = (await tenant.client.get(f"{SCENARIOS}/greets")).json()["test_scenario"]
    assert again["caller"] == {"goal": "Book a table.", "max_turns": 3}
    assert again["expect"] == made["expect"]
    deleted = await tenant.client.delete(f"{SCENARIOS}/greets")
    assert deleted.json() == {"success": True}
    assert_error(await tenant.client.get(f"{SCENARIOS}/greets"), 404, "test_scenario_not_found")


async def test_scenario_goal_caller_max_turns_defaults_to_five(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    body = scenario(agent, caller={"goal": "Ask for the opening hours."})
    made = (await tenant.client.post(SCENARIOS, json=body)).json()["test_scenario"]
    assert made["caller"] == {"goal": "Ask for the opening hours.", "max_turns": 5}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"caller": {"goal": "x", "max_turns": 21}}, "caller.max_turns"),
        ({"caller": {"goal": "x", "max_turns": 0}}, "caller.max_turns"),
        ({"caller": {"lines": ["a"], "goal": "b"}}, "caller"),
        ({"caller": {}}, "caller"),
        ({"caller": {"lines": []}}, "caller.lines"),
        ({"transport": "pigeon"}, "transport"),
        ({"expect": {"max_latency_ms": 0}}, "expect.max_latency_ms"),
        ({"expect": {"tool_calls": [{"parameters": {}}]}}, "expect.tool_calls.0.name"),
        ({"expect": {"eval_prompts": ["nope"]}}, "expect.eval_prompts"),
        (
            {"expect": {"extraction": {"schema": "missing", "result": {}}}},
            "expect.extraction.schema",
        ),
        (
            {
                "expect": {
                    "extraction": {
                        "schema": {"fields": [{"name": "city", "type": "string"}]},
                        "result": {"town": "Paris"},
                    }
                }
            },
            "expect.extraction.result",
        ),
        ({"agent": "no-such-agent"}, "agent"),
        ({"name": "agent_0123456789abcdef0123456789abcdef"}, "name"),
    ],
    ids=[
        "max-turns-over-20",
        "max-turns-zero",
        "lines-and-goal",
        "neither",
        "no-lines",
        "unknown-transport",
        "latency-zero",
        "tool-call-without-name",
        "unknown-eval-prompt",
        "unknown-extraction-schema",
        "result-field-not-in-schema",
        "unknown-agent",
        "name-shaped-like-an-id",
    ],
)
async def test_scenario_validation_names_the_field(
    tenant: Tenant, make_agent: MakeAgent, change: dict[str, Any], field: str
) -> None:
    agent = (await make_agent(tenant))["name"]
    response = await tenant.client.post(SCENARIOS, json=scenario(agent, **change))
    body = assert_error(response, 400, "validation_error")
    assert field in body["param_errors"], body


async def test_scenario_name_taken_in_the_project(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = (await make_agent(tenant))["name"]
    assert (await tenant.client.post(SCENARIOS, json=scenario(agent))).status_code == 201
    assert_error(await tenant.client.post(SCENARIOS, json=scenario(agent)), 409, "name_taken")


async def test_test_run_of_unknown_scenario_refused(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = (await make_agent(tenant))["name"]
    await tenant.client.post(SCENARIOS, json=scenario(agent))
    response = await tenant.client.post(
        "/v1/projects/main/test_runs", json={"scenarios": ["greets", "nope"]}
    )
    body = assert_error(response, 400, "validation_error")
    assert "nope" in body["param_errors"]["scenarios"]


async def test_test_run_queued_and_read_back(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = (await make_agent(tenant))["name"]
    await tenant.client.post(SCENARIOS, json=scenario(agent))
    response = await tenant.client.post("/v1/projects/main/test_runs", json={})
    assert response.status_code == 202, response.text
    run = response.json()["test_run"]
    assert run["id"].startswith("trun_")
    assert run["status"] == "queued"
    read = (await tenant.client.get(f"/v1/test_runs/{run['id']}")).json()["test_run"]
    assert read["scenarios"] == ["greets"]
    assert_error(
        await tenant.client.get("/v1/test_runs/trun_" + "0" * 32), 404, "test_run_not_found"
    )
