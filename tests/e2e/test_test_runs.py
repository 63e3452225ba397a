"""Agent test runs end to end (API.md section 19): real uvicorn, the rule-based replies, a
scripted caller spoken by Parley's synthesizer over the server's own socket."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.conftest import Customer

pytestmark = pytest.mark.anyio
SCENARIOS = "/v1/projects/main/test_scenarios"


async def finished_run(customer: Customer, run_id: str, seconds: float = 90) -> dict[str, Any]:
    """Poll the run until it is no longer queued or running."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        run: dict[str, Any] = (await customer.api.get(f"/v1/test_runs/{run_id}")).json()["test_run"]
        if run["status"] not in ("queued", "running"):
            return run
        await asyncio.sleep(0.25)
    raise AssertionError(f"test run {run_id} did not finish in {seconds} s")


async def test_test_run_scripted_caller_passing_and_failing_scenarios(customer: Customer) -> None:
    line = "Please book me a table for two at seven tonight."
    passing = {
        "name": "books-a-table",
        "agent": customer.agent,
        "caller": {"lines": [line]},
        "expect": {
            "transcript_contains": ["table for two", "you said"],
            "transcript_not_contains": ["chocolate"],
            "ended_by": ["user"],
        },
    }
    failing = {
        "name": "expects-chocolate",
        "agent": customer.agent,
        "caller": {"lines": [line]},
        "expect": {"transcript_contains": ["chocolate"], "ended_by": ["assistant"]},
    }
    for body in (passing, failing):
        made = await customer.api.post(SCENARIOS, json=body)
        assert made.status_code == 201, made.text
    queued = await customer.api.post("/v1/projects/main/test_runs", json={})
    assert queued.status_code == 202, queued.text
    run = await finished_run(customer, queued.json()["test_run"]["id"])
    assert run["status"] == "failed", run
    results = {result["scenario"]: result for result in run["results"]}
    assert results["books-a-table"]["passed"], results["books-a-table"]
    assert results["books-a-table"]["failures"] == []
    assert results["books-a-table"]["latencies_ms"], results["books-a-table"]
    failed = results["expects-chocolate"]
    assert not failed["passed"]
    assert failed["failures"] == [
        "transcript_contains: 'chocolate' was never said",
        "ended_by: expected one of assistant; it ended by user",
    ]
    conversation = (
        await customer.api.get(f"/v1/conversations/{results['books-a-table']['conversation_id']}")
    ).json()
    assert conversation["origin"] == "test"
    user_items = [item["text"] for item in conversation["items"] if item["role"] == "user"]
    assert any("table" in text.lower() for text in user_items), conversation["items"]


async def test_test_run_agent_ending_the_call_is_ended_by_assistant(customer: Customer) -> None:
    body = {
        "name": "says-goodbye",
        "agent": customer.agent,
        "caller": {"lines": ["Thank you, goodbye.", "This line is never said."]},
        "expect": {"ended_by": ["assistant"], "transcript_not_contains": ["never said"]},
    }
    assert (await customer.api.post(SCENARIOS, json=body)).status_code == 201
    queued = await customer.api.post(
        "/v1/projects/main/test_runs", json={"scenarios": ["says-goodbye"]}
    )
    run = await finished_run(customer, queued.json()["test_run"]["id"])
    assert run["status"] == "passed", run
