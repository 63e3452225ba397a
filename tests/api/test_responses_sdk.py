"""`conversation_items.replay` and `responses.create` through the official SDK (API.md
section 17), with the scripted chat server as the language model, and raw HTTP for the
errors: the model is asked as a live reply asks it, its tool calls are reported, none run."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic
from phonic.types import GenerateResponsesResponse, ReplayConversationItemResponse
from tests.api.analysis_helpers import spoken
from tests.llm_server import Call, ChatServer, Round, running_chat_server
from tests.types import MakeAgent, Tenant

from parley.config import Settings
from parley.services import Context
from parley.services.summaries import INSTRUCTIONS

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

LINES = (
    ("user", "A table for four tonight, please."),
    ("assistant", "Booked for four at eight."),
    ("user", "Thanks, that is all."),
    ("assistant", "Goodbye!"),
)
LOOKUP = {
    "name": "lookup",
    "description": "Find a booking.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "Where."}},
        "required": ["city"],
    },
}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture
def settings(settings_factory: Any, chat: ChatServer) -> Settings:
    built: Settings = settings_factory(llm_base_url=chat.base_url, llm_model="m")
    return built


def asked(chat: ChatServer) -> list[dict[str, Any]]:
    """The replays' requests to the model (not a summary's, an extraction's or a judge's)."""
    return [
        r.body
        for r in chat.requests
        if "response_format" not in r.body and r.body["messages"][0]["content"] != INSTRUCTIONS
    ]


async def item_ids(tenant: Tenant, conversation_id: str) -> list[str]:
    found = await tenant.client.get(f"/v1/conversations/{conversation_id}")
    return [item["id"] for item in found.json()["conversation"]["items"]]


async def test_sdk_conversation_items_replay_asks_with_the_history_before_the_item(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(
        tenant,
        system_prompt="You book tables for {{venue}}.",
        template_variables={"venue": {"default_value": "Chez Ada"}},
        tools=["natural_conversation_ending"],
    )
    conversation = await spoken(ctx, tenant.org.id, agent["name"], LINES)
    first_reply = (await item_ids(tenant, conversation))[1]
    chat.script.rounds.extend(
        [
            Round(text=["Four at eight, booked."]),
            Round(text=["Bye."], calls=[Call("natural_conversation_ending", ["{}"], id="c1")]),
        ]
    )

    replayed = await sdk.conversation_items.replay(first_reply, num_responses=2)
    ReplayConversationItemResponse.model_validate(replayed.model_dump())  # every member

    by_text = {response.text: response for response in replayed.responses}
    assert set(by_text) == {"Four at eight, booked.", "Bye."}
    assert by_text["Four at eight, booked."].tool_calls == []
    (ending,) = by_text["Bye."].tool_calls
    assert (ending.tool.id, ending.tool.name, ending.request_body) == (
        "natural_conversation_ending",
        "natural_conversation_ending",
        {},
    )
    requests = asked(chat)
    assert len(requests) == 2
    for body in requests:
        assert body["messages"] == [
            {"role": "system", "content": "You book tables for Chez Ada."},
            {"role": "user", "content": LINES[0][1]},
        ]
        assert [tool["function"]["name"] for tool in body["tools"]] == [
            "natural_conversation_ending"
        ]


async def test_sdk_conversation_items_replay_system_prompt_given_replaces_the_agents(
    sdk: AsyncPhonic, tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    conversation = await spoken(ctx, tenant.org.id, agent["name"], LINES)
    last_reply = (await item_ids(tenant, conversation))[3]
    chat.script.rounds.append(Round(text=["See you."]))

    replayed = await sdk.conversation_items.replay(last_reply, system_prompt="Be brief.")

    assert [r.text for r in replayed.responses] == ["See you."]
    (body,) = asked(chat)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in body["messages"][1:]] == [text for _, text in LINES[:3]]
    assert "tools" not in body


async def test_conversation_items_replay_refusals(
    tenant: Tenant, other_tenant: Tenant, ctx: Context, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    ended = await item_ids(tenant, await spoken(ctx, tenant.org.id, agent["name"], LINES))
    live = await item_ids(
        tenant, await spoken(ctx, tenant.org.id, agent["name"], LINES, ended=False)
    )
    theirs_agent = await make_agent(other_tenant)
    theirs = await item_ids(
        other_tenant, await spoken(ctx, other_tenant.org.id, theirs_agent["name"], LINES)
    )

    async def replay(item: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        response = await tenant.client.post(f"/v1/conversation_items/{item}/replay", json=body)
        return response.status_code, response.json()

    status, body = await replay(ended[0])
    assert (status, body["error"]["code"]) == (400, "not_an_assistant_item")
    status, body = await replay(live[1])
    assert (status, body["error"]["code"]) == (409, "conversation_live")
    for unknown in (theirs[1], "item_" + "0" * 32, "not-an-item"):
        status, body = await replay(unknown)
        assert (status, body["error"]["code"]) == (404, "conversation_item_not_found")
    for bad in ({"num_responses": 0}, {"num_responses": 6}, {"system_prompt": ""}, {"x": 1}):
        status, body = await replay(ended[1], bad)
        assert (status, body["error"]["code"]) == (400, "validation_error"), bad


async def test_replays_without_a_language_model_no_language_model(
    app: FastAPI, tenant: Tenant, ctx: Context, make_agent: MakeAgent, chat: ChatServer
) -> None:
    agent = await make_agent(tenant)
    item = (await item_ids(tenant, await spoken(ctx, tenant.org.id, agent["name"], LINES)))[1]
    app.state.context = dataclasses.replace(ctx, language_model=None)
    try:
        replay = await tenant.client.post(f"/v1/conversation_items/{item}/replay")
        create = await tenant.client.post(
            "/v1/responses",
            json={"system_prompt": "p", "input": [{"role": "user", "text": "Hi"}]},
        )
    finally:
        app.state.context = ctx
    assert (replay.status_code, replay.json()["error"]["code"]) == (409, "no_language_model")
    assert (create.status_code, create.json()["error"]["code"]) == (409, "no_language_model")
    assert chat.requests == []


async def test_sdk_responses_create_reports_calls_and_actions_runs_nothing(
    sdk: AsyncPhonic, chat: ChatServer
) -> None:
    chat.script.rounds.append(
        Round(
            text=["Let me check. "],
            calls=[Call("lookup", ['{"city": ', '"Oslo"}'], id="call_9")],
        )
    )
    history: list[Any] = [
        {"role": "user", "text": "Do I have a booking?"},
        {
            "role": "assistant",
            "text": "",
            "tool_calls": [
                {"tool_call_id": "t1", "tool": {"name": "lookup"}, "request_body": {"city": "Rome"}}
            ],
        },
        {"type": "tool_call_output", "tool_call_id": "t1", "response_body": {"found": False}},
        {"role": "user", "text": "And in Oslo?"},
    ]

    made = await sdk.responses.create(
        system_prompt="You find bookings.",
        input=history,
        tool_definitions=[LOOKUP],  # type: ignore[list-item]
        tools=["natural_conversation_ending"],
    )

    GenerateResponsesResponse.model_validate(made.model_dump())  # every member, typed
    (response,) = made.responses
    assert response.text == "Let me check. "
    assert response.action is None
    (call,) = response.tool_calls
    assert (call.tool_call_id, call.tool.name, call.request_body) == (
        "call_9",
        "lookup",
        {"city": "Oslo"},
    )
    (body,) = asked(chat)
    assert body["messages"][1:] == [
        {"role": "user", "content": "Do I have a booking?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"city": "Rome"})},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "t1",
            "content": json.dumps({"response_body": {"found": False}}),
        },
        {"role": "user", "content": "And in Oslo?"},
    ]
    assert [t["function"]["name"] for t in body["tools"]] == [
        "lookup",
        "natural_conversation_ending",
    ]

    chat.script.rounds.extend(
        [Round(text=["Goodbye."], calls=[Call("natural_conversation_ending")])] * 3
    )
    ended = await sdk.responses.create(
        system_prompt="p",
        input=[{"role": "user", "text": "Bye."}],
        tools=["natural_conversation_ending"],
        num_responses=3,
    )
    assert len(ended.responses) == 3
    for one in ended.responses:
        assert one.text == "Goodbye."
        assert one.tool_calls == []
        assert one.action is not None
        assert one.action.type == "assistant_ended_conversation"


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"input": []}, 400, "validation_error", "input"),
        ({"num_responses": 6}, 400, "validation_error", "num_responses"),
        ({"tools": ["web_search"]}, 400, "not_supported", "tools"),
        ({"tools": ["my_stored_tool"]}, 400, "not_supported", "tools"),
        (
            {"tool_definitions": [{**LOOKUP, "name": "keypad_input"}]},
            400,
            "validation_error",
            "tool_definitions[0]",
        ),
        (
            {"tool_definitions": [{**LOOKUP, "parameters": {"type": "string"}}]},
            400,
            "validation_error",
            "tool_definitions[0].parameters",
        ),
        (
            {
                "input": [
                    {"role": "user", "text": "Hi"},
                    {"type": "tool_call_output", "tool_call_id": "t1", "response_body": 1},
                ]
            },
            400,
            "validation_error",
            "input[1]",
        ),
        (
            {
                "input": [
                    {
                        "role": "assistant",
                        "text": "",
                        "tool_calls": [{"tool_call_id": "t1", "tool": {"name": "lookup"}}],
                    },
                    {"role": "user", "text": "Hi"},
                ]
            },
            400,
            "validation_error",
            "input[1]",
        ),
        (
            {"input": [{"role": "assistant", "text": ""}]},
            400,
            "validation_error",
            "input[0]",
        ),
        ({"project": "nope"}, 404, "project_not_found", None),
        ({"default_language": "English"}, 400, "validation_error", "default_language"),
    ],
    ids=[
        "no-input",
        "too-many-responses",
        "web-search",
        "stored-tool",
        "built-in-name-taken",
        "parameters-not-an-object",
        "output-without-call",
        "call-without-output",
        "assistant-says-nothing",
        "unknown-project",
        "language-not-a-tag",
    ],
)
async def test_responses_create_bad_request_refused(
    tenant: Tenant,
    chat: ChatServer,
    body: dict[str, Any],
    status: int,
    code: str,
    field: str | None,
) -> None:
    sent = {"system_prompt": "p", "input": [{"role": "user", "text": "Hi"}], **body}
    response = await tenant.client.post("/v1/responses", json=sent)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    if field is not None:
        assert field in response.json()["param_errors"]
    assert asked(chat) == []
