"""The official Phonic SDK's socket client and payload classes, unchanged, against a real
`parley serve` (API.md sections 8 and 12): a config with an inline WebSocket tool and
template variables, a tool call answered with the SDK's payload, every server message
parsed into the SDK's own types."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from phonic import (
    AssistantFinishedSpeakingPayload,
    AudioChunkResponsePayload,
    ConfigPayload,
    ConversationCreatedPayload,
    GenerateReplyPayload,
    Phonic,
    ReadyToStartConversationPayload,
    ToolCallOutputPayload,
    ToolCallOutputProcessedPayload,
    ToolCallPayload,
    UpdateToolsSubsetPayload,
)
from phonic.environment import PhonicEnvironment
from phonic.types import InlineWebSocketTool, OpenAiFunction, OpenAiTool

from tests.faults.serve_process import ServeProcess
from tests.llm_server import Call, ChatServer, Round, running_chat_server

pytestmark = [
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]
MAX_MESSAGES = 400


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("sdk-socket"),
        PARLEY_LLM_BASE_URL=chat.base_url,
        PARLEY_LLM_MODEL="bistro-7b",
    )
    try:
        process.start()
        assert process.first_key is not None
        yield process
    finally:
        process.ensure_stopped()


@pytest.fixture(scope="module")
def client(serve: ServeProcess) -> Iterator[Phonic]:
    environment = PhonicEnvironment(base=f"{serve.http}/v1", production=serve.ws)
    with httpx.Client(timeout=10) as http:
        yield Phonic(api_key=serve.first_key, environment=environment, httpx_client=http)


def next_of(socket: Any, kind: type) -> Any:
    """Read the SDK's parsed messages until one of `kind` (bounded)."""
    for _, message in zip(range(MAX_MESSAGES), socket, strict=False):
        if isinstance(message, kind):
            return message
    raise AssertionError(f"no {kind.__name__}")


def test_sdk_socket_inline_tool_call_round_trip(client: Phonic, chat: ChatServer) -> None:
    client.agents.create(
        name="sdk-socket",
        system_prompt="You serve {{shop}}.",
        template_variables={"shop": {"default_value": "the bistro"}},
        welcome_message=None,
    )
    arguments = json.dumps({"order": "A17"})
    chat.script.rounds.append(Round(calls=[Call("lookup_order", [arguments], id="call_x")]))
    chat.script.rounds.append(Round(text=["Order A17 ships today."]))
    lookup = InlineWebSocketTool(
        tool_schema=OpenAiTool(
            function=OpenAiFunction(
                name="lookup_order",
                description="Find an order.",
                parameters={
                    "type": "object",
                    "properties": {"order": {"type": "string"}},
                    "required": ["order"],
                    "additionalProperties": False,
                },
            )
        ),
        tool_call_output_timeout_ms=10_000,
    )

    with client.conversations.connect() as socket:
        socket.send_config(
            ConfigPayload(
                agent="sdk-socket",
                input_format="pcm_16000",
                output_format="pcm_16000",
                tools=[lookup],
                template_variables={"shop": "Chez Ada"},
            )
        )
        created = next_of(socket, ConversationCreatedPayload)
        next_of(socket, ReadyToStartConversationPayload)
        socket.send_generate_reply(GenerateReplyPayload(user_message="Where is A17?"))
        call = next_of(socket, ToolCallPayload)
        socket.send_tool_call_output(
            ToolCallOutputPayload(tool_call_id=call.tool_call_id, output={"status": "shipped"})
        )
        processed = next_of(socket, ToolCallOutputProcessedPayload)
        next_of(socket, AssistantFinishedSpeakingPayload)
        socket.send_update_tools_subset(UpdateToolsSubsetPayload(tools=[]))
        socket.send_generate_reply(GenerateReplyPayload(user_message="Thanks"))
        next_of(socket, AssistantFinishedSpeakingPayload)

    assert call.tool_name == "lookup_order"
    assert call.parameters == {"order": "A17"}
    assert processed.tool_call_id == call.tool_call_id
    assert processed.tool.name == "lookup_order"
    assert processed.output == {"status": "shipped"}
    assert processed.conversation_item_role == "assistant"
    first, second, third = (request.body for request in chat.requests[-3:])
    assert first["messages"][0] == {"role": "system", "content": "You serve Chez Ada."}
    assert [tool["function"]["name"] for tool in first["tools"]] == ["lookup_order"]
    assert [json.loads(m["content"]) for m in second["messages"] if m["role"] == "tool"] == [
        {"status": "shipped"}
    ]
    assert "tools" not in third  # update_tools_subset with no tools
    conversation = client.conversations.get(created.conversation_id).conversation
    assert conversation.template_variables == {"shop": "Chez Ada"}
    calls = [c for item in conversation.items for c in (item.tool_calls or [])]
    assert [c.id for c in calls] == [call.tool_call_id]


def test_sdk_socket_generated_welcome_is_the_models_text_and_it_knows_the_local_time(
    client: Phonic, chat: ChatServer
) -> None:
    """API.md section 17: an agent made with `timezone` through the SDK, a `config` with the
    SDK's `generate_welcome_message` and `audio_speed`: the welcome sent is the model's
    words, and the model was told the local time in that zone."""
    client.agents.create(
        name="sdk-welcome",
        system_prompt="You serve Chez Ada.",
        welcome_message="The stored welcome, not used.",
        timezone="Asia/Tokyo",
    )
    # The default answer, not a round: the work after an earlier test's call (its summary)
    # may ask the model meanwhile, and would take a round.
    usual, chat.script.reply = chat.script.reply, ["Konnichiwa, this is Chez Ada. ", "Hello."]
    asked = len(chat.requests)
    tokyo = ZoneInfo("Asia/Tokyo")
    before = datetime.now(tokyo).replace(second=0, microsecond=0)
    try:
        with client.conversations.connect() as socket:
            socket.send_config(
                ConfigPayload(
                    agent="sdk-welcome",
                    input_format="pcm_16000",
                    output_format="pcm_16000",
                    generate_welcome_message=True,
                    audio_speed=1.5,
                )
            )
            next_of(socket, ReadyToStartConversationPayload)
            first = next_of(socket, AudioChunkResponsePayload)
            next_of(socket, AssistantFinishedSpeakingPayload)
    finally:
        chat.script.reply = usual
    assert first.text == "Konnichiwa, this is Chez Ada."
    (request,) = (r.body for r in chat.requests[asked:] if r.body.get("stream"))
    system = request["messages"][0]["content"]
    prompt, told = system.split("\n\n")
    assert prompt == "You serve Chez Ada."
    found = re.fullmatch(
        r"The local time is (\w+, \d+ \w+ \d{4}, \d\d:\d\d) \(Asia/Tokyo\)\.", told
    )
    assert found is not None, told
    local = datetime.strptime(found.group(1), "%A, %d %B %Y, %H:%M").replace(tzinfo=tokyo)
    assert before <= local <= datetime.now(tokyo)
