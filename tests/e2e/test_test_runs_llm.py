"""Agent test runs with the language model (API.md section 19): the OpenAI-protocol test
server scripts both a goal-driven caller (which ends the call with `hang_up`) and an agent
that calls a webhook tool, whose scenario's `tool_overrides` answer in place of its endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Customer
from tests.e2e.test_test_runs import SCENARIOS, finished_run
from tests.e2e.test_tools_ws import call_round
from tests.llm_server import Call, ChatServer, Round, running_chat_server
from tests.webhook_receiver import WebhookReceiver, running_receiver

pytestmark = pytest.mark.anyio


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as server:
        yield server


@pytest.fixture
def app_settings(chat: ChatServer) -> dict[str, Any]:
    return {
        "llm_base_url": chat.base_url,
        "llm_api_key": "sk-test",
        "llm_model": "bistro-7b",
        "llm_timeout_seconds": 5.0,
        "outbound_allow_http": True,
        "outbound_allow_private_networks": True,
    }


async def test_test_run_goal_caller_and_tool_override(
    customer: Customer, chat: ChatServer, receiver: WebhookReceiver
) -> None:
    tool = await customer.api.post(
        "/v1/tools",
        json={
            "name": "book_table",
            "description": "Book a table.",
            "type": "custom_webhook",
            "endpoint_method": "POST",
            "endpoint_url": receiver.url("/bookings"),
            "parameters": {
                "type": "object",
                "properties": {"people": {"type": "integer"}},
                "required": ["people"],
            },
        },
    )
    assert tool.status_code == 201, tool.text
    patched = await customer.api.patch(
        f"/v1/agents/{customer.agent}", json={"tools": ["book_table"]}
    )
    assert patched.status_code == 200, patched.text
    body = {
        "name": "books-by-goal",
        "agent": customer.agent,
        "caller": {"goal": "Book a table for two people tonight.", "max_turns": 3},
        "expect": {
            "tool_calls": [{"name": "book_table", "parameters": {"people": 2}}],
            "transcript_contains": ["booked"],
            "ended_by": ["user"],
        },
        "tool_overrides": {"book_table": {"booking": "T-1"}},
    }
    assert (await customer.api.post(SCENARIOS, json=body)).status_code == 201
    chat.script.rounds.extend(
        [
            Round(text=["A table for two, please."]),  # the caller's first words
            call_round("book_table", {"people": 2}),  # the agent calls its tool
            Round(text=["Your table is booked."]),  # and answers with its output
            Round(calls=[Call("hang_up", ["{}"], id="call_c1")]),  # the caller is done
        ]
    )
    queued = await customer.api.post("/v1/projects/main/test_runs", json={})
    run = await finished_run(customer, queued.json()["test_run"]["id"])
    assert run["status"] == "passed", run
    assert receiver.requests == []  # the override answered in place of the endpoint
    caller_requests = [
        r.body for r in chat.requests if r.body.get("tools") and not r.body.get("stream")
    ]
    assert caller_requests, [r.body for r in chat.requests]
    offered = [t["function"]["name"] for t in caller_requests[0]["tools"]]
    assert offered == ["hang_up"]
    assert "Book a table for two people tonight." in caller_requests[0]["messages"][0]["content"]
    tool_outputs = [
        json.loads(m["content"])
        for r in chat.requests
        for m in r.body.get("messages", [])
        if m["role"] == "tool"
    ]
    assert {"booking": "T-1"} in tool_outputs
    conversation_id = run["results"][0]["conversation_id"]
    conversation = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    items = conversation["conversation"]["items"]
    calls = [call for item in items for call in item.get("tool_calls") or []]
    assert [call["output"] for call in calls] == [{"booking": "T-1"}]


async def test_test_run_goal_caller_failing_expectation_names_it(
    customer: Customer, chat: ChatServer
) -> None:
    body = {
        "name": "expects-a-tool",
        "agent": customer.agent,
        "caller": {"goal": "Ask whether they are open.", "max_turns": 1},
        "expect": {"tool_calls": [{"name": "book_table"}]},
    }
    assert (await customer.api.post(SCENARIOS, json=body)).status_code == 201
    chat.script.rounds.extend(
        [Round(text=["Are you open tonight?"]), Round(text=["Yes, we are open."])]
    )
    queued = await customer.api.post("/v1/projects/main/test_runs", json={})
    run = await finished_run(customer, queued.json()["test_run"]["id"])
    assert run["status"] == "failed", run
    assert run["results"][0]["failures"] == [
        "tool_calls: book_table was never called (calls made: none)"
    ]


async def test_test_run_eval_prompts_and_extraction_asked_of_the_model(
    customer: Customer, chat: ChatServer
) -> None:
    # One answer serves every request: a verdict, and the one field `result` extracted.
    chat.script.reply = ['{"result": "successful"}']
    prompt = await customer.api.post(
        "/v1/projects/main/conversation_eval_prompts",
        json={"name": "polite", "prompt": "The agent was polite."},
    )
    assert prompt.status_code == 200, prompt.text
    schema = {"fields": [{"name": "result", "type": "string"}]}
    for name, value in (("judged", "successful"), ("misjudged", "unsuccessful")):
        body = {
            "name": name,
            "agent": customer.agent,
            "caller": {"lines": ["Hello, are you there?"]},
            "expect": {
                "eval_prompts": ["polite"],
                "extraction": {"schema": schema, "result": {"result": value}},
            },
        }
        made = await customer.api.post(SCENARIOS, json=body)
        assert made.status_code == 201, made.text
    queued = await customer.api.post("/v1/projects/main/test_runs", json={})
    run = await finished_run(customer, queued.json()["test_run"]["id"])
    results = {result["scenario"]: result for result in run["results"]}
    assert results["judged"]["failures"] == [], results
    assert results["misjudged"]["failures"] == [
        'extraction: \'result\' was "successful", expected "unsuccessful"'
    ]
    assert run["status"] == "failed"
    evaluations = [r.body for r in chat.requests if "polite" in json.dumps(r.body)]
    assert evaluations, "no evaluation was asked of the model"
