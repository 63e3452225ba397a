"""The language-model replier against a real OpenAI-protocol server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.llm_server import ChatServer, running_chat_server

from parley.engine import ChatCompletionReplies, ReplyModelFailed, ReplyRequest, Turn

pytestmark = pytest.mark.anyio
KEY = "sk-test-secret-0123456789"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


def replier(server: ChatServer, **options: float) -> ChatCompletionReplies:
    return ChatCompletionReplies(
        base_url=server.base_url,
        api_key=KEY,
        model="tiny-chat",
        **options,  # type: ignore[arg-type]
    )


def request(**overrides: object) -> ReplyRequest:
    values: dict[str, object] = {
        "agent_name": "bistro",
        "system_prompt": "You are the booking assistant of Bistro Lumen.",
        "language": "en",
        "history": (
            Turn("assistant", "Welcome to Bistro Lumen."),
            Turn("user", "Please book a table for two."),
        ),
        "user_message": "Please book a table for two.",
    }
    values.update(overrides)
    return ReplyRequest(**values)  # type: ignore[arg-type]


async def collect(replies: ChatCompletionReplies, req: ReplyRequest) -> list[object]:
    try:
        return [part async for part in replies.reply(req)]
    finally:
        await replies.aclose()


async def test_llm_reply_streams_model_text(chat: ChatServer) -> None:
    parts = await collect(replier(chat), request())
    assert "".join(str(p) for p in parts) == "Sure. Your table is booked."
    assert len(parts) == 3  # streamed piece by piece, not buffered


async def test_llm_request_carries_system_prompt_history_and_model(chat: ChatServer) -> None:
    await collect(replier(chat), request(system_message="Offer the terrace."))
    (sent,) = chat.requests
    assert sent.body["model"] == "tiny-chat"
    assert sent.body["stream"] is True
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are the booking assistant of Bistro Lumen."},
        {"role": "assistant", "content": "Welcome to Bistro Lumen."},
        {"role": "user", "content": "Please book a table for two."},
        {"role": "system", "content": "Offer the terrace."},
    ]
    assert sent.authorization == f"Bearer {KEY}"


async def test_llm_history_bounded(chat: ChatServer) -> None:
    history = tuple(Turn("user" if i % 2 else "assistant", f"turn {i}") for i in range(30))
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key=KEY, model="m", max_history=4)
    await collect(replies, request(history=history))
    messages = chat.requests[0].body["messages"]
    assert [m["content"] for m in messages[1:]] == ["turn 26", "turn 27", "turn 28", "turn 29"]


async def test_llm_server_error_raises_reply_model_failed_without_key(
    chat: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat.script.status = 500
    with pytest.raises(ReplyModelFailed) as failed:
        await collect(replier(chat), request())
    assert KEY not in str(failed.value)
    assert "overloaded" not in failed.value.message
    assert KEY not in caplog.text
    assert "HTTP 500" in caplog.text


async def test_llm_first_token_timeout_raises_reply_model_failed(chat: ChatServer) -> None:
    chat.script.delay_s = 3.0
    with pytest.raises(ReplyModelFailed, match="in time"):
        await collect(replier(chat, first_token_timeout_s=1.0), request())


async def test_llm_stall_mid_answer_times_out_after_first_piece(chat: ChatServer) -> None:
    chat.script.stall_s = 3.0
    parts: list[object] = []
    replies = replier(chat, timeout_s=1.0)

    async def consume() -> None:
        async for part in replies.reply(request()):
            parts.append(part)

    with pytest.raises(ReplyModelFailed):
        await consume()
    await replies.aclose()
    assert parts == ["Sure. "]


async def test_llm_unreachable_server_raises_reply_model_failed() -> None:
    replies = ChatCompletionReplies(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m")
    with pytest.raises(ReplyModelFailed):
        await collect(replies, request())
