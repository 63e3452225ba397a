"""Tool calls through the OpenAI protocol, against a real streaming server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.llm_server import Call, ChatServer, Round, running_chat_server

from parley.engine import (
    ChatCompletionReplies,
    ReplyRequest,
    ToolCallPart,
    ToolDefinition,
    Turn,
)

pytestmark = pytest.mark.anyio

ORDER = ToolDefinition(
    name="get_order",
    description="Look up an order by its number.",
    parameters={
        "type": "object",
        "properties": {"number": {"type": "integer"}},
        "required": ["number"],
        "additionalProperties": False,
    },
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Today's weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


def request(**overrides: object) -> ReplyRequest:
    values: dict[str, object] = {
        "agent_name": "shop",
        "system_prompt": "You are the order desk of Acme.",
        "language": "en",
        "history": (Turn("user", "Where is order 42?"),),
        "user_message": "Where is order 42?",
        "tools": (ORDER, WEATHER),
    }
    values.update(overrides)
    return ReplyRequest(**values)  # type: ignore[arg-type]


async def collect(server: ChatServer, req: ReplyRequest, **options: int) -> list[object]:
    replies = ChatCompletionReplies(base_url=server.base_url, api_key="k", model="m", **options)
    try:
        return [part async for part in replies.reply(req)]
    finally:
        await replies.aclose()


def calls(parts: list[object]) -> list[ToolCallPart]:
    return [part for part in parts if isinstance(part, ToolCallPart)]


async def test_llm_tools_sent_as_openai_functions_with_json_schema(chat: ChatServer) -> None:
    await collect(chat, request())
    assert chat.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up an order by its number.",
                "parameters": dict(ORDER.parameters),
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Today's weather in a city.",
                "parameters": dict(WEATHER.parameters),
            },
        },
    ]


async def test_llm_request_without_tools_sends_no_tools_field(chat: ChatServer) -> None:
    await collect(chat, request(tools=()))
    assert "tools" not in chat.requests[0].body


async def test_llm_tool_call_arguments_split_over_chunks_assembled_after_text(
    chat: ChatServer,
) -> None:
    chat.script.rounds.append(
        Round(
            text=["Let me ", "check. "],
            calls=[Call("get_order", ['{"num', 'ber": ', "42}"], id="call_a")],
        )
    )
    parts = await collect(chat, request())
    assert parts == ["Let me ", "check. ", ToolCallPart("call_a", "get_order", '{"number": 42}')]


async def test_llm_parallel_calls_with_distinct_indexes_yield_separate_calls(
    chat: ChatServer,
) -> None:
    chat.script.rounds.append(
        Round(
            calls=[
                Call("get_order", ['{"number"', ": 1}"], id="call_a", index=0),
                Call("get_weather", ['{"city"', ': "Oslo"}'], id="call_b", index=1),
            ],
            interleave=True,  # the chunks of the two calls alternate
        )
    )
    assert calls(await collect(chat, request())) == [
        ToolCallPart("call_a", "get_order", '{"number": 1}'),
        ToolCallPart("call_b", "get_weather", '{"city": "Oslo"}'),
    ]


async def test_llm_parallel_calls_reusing_index_0_with_distinct_ids_yield_separate_calls(
    chat: ChatServer,
) -> None:
    chat.script.rounds.append(
        Round(
            calls=[
                Call("get_order", ['{"number": 1}'], id="call_a"),
                Call("get_order", ['{"number"', ": 2}"], id="call_b"),
            ]
        )
    )
    assert calls(await collect(chat, request())) == [
        ToolCallPart("call_a", "get_order", '{"number": 1}'),
        ToolCallPart("call_b", "get_order", '{"number": 2}'),
    ]


async def test_llm_tool_calls_without_id_get_distinct_generated_ids(chat: ChatServer) -> None:
    chat.script.rounds.append(
        Round(calls=[Call("get_order", ['{"number": 1}']), Call("get_weather", ["{}"])])
    )
    first, second = calls(await collect(chat, request()))
    assert (first.name, first.arguments) == ("get_order", '{"number": 1}')
    assert (second.name, second.arguments) == ("get_weather", "{}")
    assert first.id.startswith("call_")
    assert second.id.startswith("call_")
    assert first.id != second.id


async def test_llm_broken_json_arguments_yielded_raw_for_the_engine_to_refuse(
    chat: ChatServer,
) -> None:
    chat.script.rounds.append(Round(calls=[Call("get_order", ['{"number": '], id="call_x")]))
    assert calls(await collect(chat, request())) == [
        ToolCallPart("call_x", "get_order", '{"number": ')
    ]


async def test_llm_history_sends_assistant_tool_calls_and_tool_messages(
    chat: ChatServer,
) -> None:
    call = ToolCallPart("call_a", "get_order", '{"number": 42}')
    history = (
        Turn("user", "Where is order 42?"),
        Turn("assistant", "Let me check.", tool_calls=(call,)),
        Turn("tool", '{"status": "shipped"}', tool_call_id="call_a"),
        Turn("assistant", "", tool_calls=(ToolCallPart("call_b", "get_weather", "{}"),)),
        Turn("tool", '{"status": "started"}', tool_call_id="call_b"),
    )
    await collect(chat, request(history=history))
    assert chat.requests[0].body["messages"][1:] == [
        {"role": "user", "content": "Where is order 42?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"number": 42}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": '{"status": "shipped"}'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_b", "content": '{"status": "started"}'},
    ]
    assert json.loads(chat.requests[0].body["messages"][3]["content"]) == {"status": "shipped"}


async def test_llm_history_limit_leaves_out_tool_messages_whose_call_was_cut(
    chat: ChatServer,
) -> None:
    call = ToolCallPart("call_a", "get_order", "{}")
    history = (
        Turn("assistant", "", tool_calls=(call,)),
        Turn("tool", '{"a": 1}', tool_call_id="call_a"),
        Turn("assistant", "Order 42 has shipped."),
        Turn("user", "Thanks."),
    )
    await collect(chat, request(history=history), max_history=3)
    messages = chat.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["system", "assistant", "user"]
