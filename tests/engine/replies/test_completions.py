"""Whole answers from the language model (the work after a call) against a real
OpenAI-protocol server on loopback: what is sent, what comes back, how failures are told
apart (no answer: Unavailable; a refusal: LanguageModelRefused)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.llm_server import ChatServer, json_round, running_chat_server

from parley.engine import ChatCompletions, LanguageModelRefused
from parley.errors import Unavailable

pytestmark = pytest.mark.anyio
KEY = "sk-test-secret-0123456789"
MESSAGES = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Hi."}]
FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "strict": True, "schema": {"type": "object"}},
}


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


async def ask(model: ChatCompletions, **options: object) -> str:
    try:
        return await model.complete(MESSAGES, **options)  # type: ignore[arg-type]
    finally:
        await model.aclose()


def client(server: ChatServer, timeout_s: float = 5.0) -> ChatCompletions:
    return ChatCompletions(
        base_url=server.base_url, api_key=KEY, model="judge", timeout_s=timeout_s
    )


async def test_completions_whole_answer_text_returned(chat: ChatServer) -> None:
    chat.script.rounds.append(json_round({"result": "successful"}))
    assert await ask(client(chat)) == '{"result": "successful"}'


async def test_completions_request_carries_messages_model_format_and_key(chat: ChatServer) -> None:
    await ask(client(chat), response_format=FORMAT, max_tokens=77)
    (sent,) = chat.requests
    assert sent.body["model"] == "judge"
    assert sent.body["messages"] == MESSAGES
    assert sent.body["response_format"] == FORMAT
    assert sent.body["max_tokens"] == 77
    assert not sent.body.get("stream")
    assert sent.authorization == f"Bearer {KEY}"


async def test_completions_without_format_sends_none(chat: ChatServer) -> None:
    await ask(client(chat))
    assert "response_format" not in chat.requests[0].body


async def test_completions_no_answer_in_time_unavailable(chat: ChatServer) -> None:
    chat.script.delay_s = 2.0
    with pytest.raises(Unavailable) as raised:
        await ask(client(chat, timeout_s=0.3))
    assert raised.value.code == "service_unavailable"


async def test_completions_connection_refused_unavailable() -> None:
    model = ChatCompletions(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m")
    with pytest.raises(Unavailable):
        await ask(model)


@pytest.mark.parametrize("status", [500, 503, 429, 408])
async def test_completions_server_error_or_overload_unavailable(
    chat: ChatServer, status: int
) -> None:
    chat.script.status = status
    with pytest.raises(Unavailable) as raised:
        await ask(client(chat))
    assert KEY not in raised.value.message


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_completions_client_error_refused(chat: ChatServer, status: int) -> None:
    chat.script.status = status
    with pytest.raises(LanguageModelRefused) as raised:
        await ask(client(chat))
    assert "model overloaded" not in raised.value.message  # never the server's own words


async def test_completions_client_made_once_and_only_when_asked(chat: ChatServer) -> None:
    model = client(chat)
    await model.aclose()  # nothing made yet: nothing to close
    await ask(model)
    assert len(chat.requests) == 1


async def test_completions_respond_sends_history_and_tools_returns_calls(chat: ChatServer) -> None:
    """`respond` (the replays of API.md section 17): the live reply's messages and tools
    are sent, not streamed; the text and every call come back, in order, and nothing is
    run."""
    from tests.llm_server import Call, Round

    from parley.engine import ToolCallPart, ToolDefinition, Turn

    chat.script.rounds.append(
        Round(
            text=["Checking."],
            calls=[Call("lookup", ['{"city": "Oslo"}'], id="call_a"), Call("lookup", id="call_b")],
        )
    )
    lookup = ToolDefinition(
        name="lookup", description="Find.", parameters={"type": "object", "properties": {}}
    )
    history = [
        Turn("user", "Hi."),
        Turn("assistant", "", tool_calls=(ToolCallPart("t1", "lookup", "{}"),)),
        Turn("tool", '{"found": false}', tool_call_id="t1"),
    ]
    model = client(chat)
    try:
        answer = await model.respond(system_prompt="Help.", history=history, tools=[lookup])
    finally:
        await model.aclose()
    assert answer.text == "Checking."
    assert [(c.id, c.name, c.arguments) for c in answer.tool_calls] == [
        ("call_a", "lookup", '{"city": "Oslo"}'),
        ("call_b", "lookup", "{}"),
    ]
    (sent,) = chat.requests
    assert sent.body["stream"] is False
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user", "assistant", "tool"]
    assert [t["function"]["name"] for t in sent.body["tools"]] == ["lookup"]
