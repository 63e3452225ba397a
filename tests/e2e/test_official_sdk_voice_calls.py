"""The official Phonic SDK's speech stream and socket controls, unchanged, against a real
`parley serve` with the scripted chat server as its model (API.md section 17): `tts.stream`
really streams, and the socket's `reset`, `add_system_message` and `input_cancelled`."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from phonic import (
    AddSystemMessagePayload,
    AssistantFinishedSpeakingPayload,
    AudioChunkPayload,
    ConfigOptions,
    ConfigPayload,
    ConversationCreatedPayload,
    ErrorPayload,
    GenerateReplyPayload,
    InputCancelledPayload,
    InputTextPayload,
    Phonic,
    ReadyToStartConversationPayload,
    ResetPayload,
    UserStartedSpeakingPayload,
)
from phonic.environment import PhonicEnvironment

from tests import speech
from tests.faults.serve_process import ServeProcess
from tests.llm_server import ChatServer, running_chat_server

pytestmark = [
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]
MAX_MESSAGES = 400
TWO_SENTENCES = "Thanks for calling the bistro. Your table for two is booked for seven."


@pytest.fixture(scope="module")
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("sdk-voice"),
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
    with httpx.Client(timeout=30) as http:
        yield Phonic(api_key=serve.first_key, environment=environment, httpx_client=http)


def next_of(socket: Any, kind: type, *, before: type | None = None) -> Any:
    """Read the SDK's parsed messages until one of `kind` (bounded); fail on `before`."""
    for _, message in zip(range(MAX_MESSAGES), socket, strict=False):
        if before is not None and isinstance(message, before):
            raise AssertionError(f"{before.__name__} came first: {message}")
        if isinstance(message, kind):
            return message
    raise AssertionError(f"no {kind.__name__}")


def replies_asked(chat: ChatServer) -> list[list[dict[str, Any]]]:
    """The messages of each streamed request: the replies in conversations (the summaries
    after each conversation ask for whole answers, at a time of their own)."""
    return [request.body["messages"] for request in chat.requests if request.body.get("stream")]


def pcm16(audio: bytes) -> np.ndarray:
    return np.frombuffer(audio, dtype="<i2").astype(np.float64) / 32768


def test_sdk_tts_stream_joined_is_pcm_16000_speech(client: Phonic) -> None:
    audio = b"".join(client.tts.stream(text=TWO_SENTENCES, voice_id="heart"))
    samples = pcm16(audio)
    assert 3.0 < samples.size / 16_000 < 8.0  # two sentences at 16 kHz
    windows = samples[: samples.size // 400 * 400].reshape(-1, 400)
    levels = np.sqrt((windows**2).mean(axis=1))
    assert levels.max() > 0.05  # voiced
    assert (levels < 0.01).mean() > 0.02  # with the pauses of speech, not one tone


def test_tts_stream_first_bytes_arrive_before_the_text_is_all_spoken(
    serve: ServeProcess,
) -> None:
    text = " ".join(speech.SENTENCES[:16])
    headers = {"Authorization": f"Bearer {serve.first_key}"}
    with httpx.Client(timeout=30) as http:
        started = time.perf_counter()
        with http.stream(
            "POST", f"{serve.http}/v1/tts/stream", json={"text": text}, headers=headers
        ) as response:
            assert response.status_code == 200
            arrivals = [(time.perf_counter(), len(part)) for part in response.iter_raw()]
    first, last = arrivals[0][0] - started, arrivals[-1][0] - started
    assert len(arrivals) >= 4
    assert first < last / 4, (first, last)  # the first sentence went out as soon as it was made
    assert sum(size for _, size in arrivals) > 16_000 * 2 * 30  # over 30 s of speech


def test_sdk_socket_add_system_message_joins_history_without_a_reply(
    client: Phonic, chat: ChatServer
) -> None:
    client.agents.create(
        name="sdk-note", system_prompt="You serve the bistro.", welcome_message=None
    )
    asked = len(replies_asked(chat))
    with client.conversations.connect() as socket:
        socket.send_config(ConfigPayload(agent="sdk-note", input_format="pcm_16000"))
        next_of(socket, ReadyToStartConversationPayload)
        socket.send_add_system_message(
            AddSystemMessagePayload(system_message="The caller is a premium member.")
        )
        socket.send_generate_reply(GenerateReplyPayload(user_message="Hello?"))
        next_of(socket, AssistantFinishedSpeakingPayload)
    assert len(replies_asked(chat)) == asked + 1  # the note asked the model for nothing
    messages = replies_asked(chat)[-1]
    assert messages == [
        {"role": "system", "content": "You serve the bistro."},
        {"role": "system", "content": "The caller is a premium member."},
        {"role": "user", "content": "Hello?"},
    ]


def test_sdk_socket_reset_goes_on_with_the_new_settings(client: Phonic, chat: ChatServer) -> None:
    client.agents.create(
        name="sdk-reset",
        system_prompt="You serve {{shop}}.",
        template_variables={"shop": {"default_value": "the bistro"}},
        welcome_message=None,
    )
    with client.conversations.connect() as socket:
        socket.send_config(ConfigPayload(agent="sdk-reset", output_format="pcm_16000"))
        created = next_of(socket, ConversationCreatedPayload)
        next_of(socket, ReadyToStartConversationPayload)
        socket.send_generate_reply(GenerateReplyPayload(user_message="Hi"))
        next_of(socket, AssistantFinishedSpeakingPayload)
        socket.send_reset(
            ResetPayload(config=ConfigOptions(agent="sdk-reset", output_format="pcm_24000"))
        )
        refused = next_of(socket, ErrorPayload)
        socket.send_reset(
            ResetPayload(
                config=ConfigOptions(
                    agent="sdk-reset",
                    output_format="pcm_16000",
                    template_variables={"shop": "the bakery"},
                    voice_id="us_female",
                )
            )
        )
        socket.send_generate_reply(GenerateReplyPayload(user_message="Who are you?"))
        next_of(socket, AssistantFinishedSpeakingPayload, before=ConversationCreatedPayload)
    assert refused.error.code == "validation_error"
    assert "output_format" in (refused.param_errors or {})
    first, second = replies_asked(chat)[-2:]
    assert first[0] == {"role": "system", "content": "You serve the bistro."}
    assert second == [  # the same conversation goes on, with the new prompt
        {"role": "system", "content": "You serve the bakery."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Sure. Your table is booked."},
        {"role": "user", "content": "Who are you?"},
    ]
    conversation = client.conversations.get(created.conversation_id).conversation
    assert conversation.template_variables == {"shop": "the bakery"}
    assert [item.role for item in conversation.items] == ["user", "assistant"] * 2


def test_sdk_socket_speech_without_words_input_cancelled(client: Phonic) -> None:
    client.agents.create(name="sdk-cough", system_prompt="You listen.", welcome_message=None)
    voice = speech.spoken("Hello, I need some help with my order.")
    start = int(np.argmax(np.abs(voice) > 0.02))
    cough = voice[start : start + 150 * 24]  # 150 ms: speech starts, too short for words
    with client.conversations.connect() as socket:
        socket.send_config(ConfigPayload(agent="sdk-cough", input_format="pcm_16000"))
        next_of(socket, ReadyToStartConversationPayload)
        for chunk in speech.stream(speech.AudioFormat.PCM_16000, 0.3, cough, 0.9):
            socket.send_audio_chunk(AudioChunkPayload(audio=base64.b64encode(chunk).decode()))
        next_of(socket, UserStartedSpeakingPayload)
        cancelled = next_of(socket, InputCancelledPayload, before=InputTextPayload)
    assert cancelled.type == "input_cancelled"
