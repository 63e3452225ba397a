"""The official Phonic SDK, unchanged, with the built-ins `keypad_input` and
`choose_not_to_respond` (API.md section 15) against a real `parley serve`: the SDK's tool
names are accepted on an agent, and the socket's `dtmf` and `assistant_chose_not_to_respond`
frames parse into the SDK's own payload types."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from phonic import (
    AssistantChoseNotToRespondPayload,
    AssistantFinishedSpeakingPayload,
    AudioChunkResponsePayload,
    ConfigPayload,
    DtmfPayload,
    GenerateReplyPayload,
    Phonic,
    ReadyToStartConversationPayload,
)
from phonic.environment import PhonicEnvironment

from tests.e2e.test_official_sdk_socket import next_of
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
def client(tmp_path_factory: pytest.TempPathFactory, chat: ChatServer) -> Iterator[Phonic]:
    process = ServeProcess(
        tmp_path_factory.mktemp("sdk-builtins"),
        PARLEY_LLM_BASE_URL=chat.base_url,
        PARLEY_LLM_MODEL="bistro-7b",
    )
    try:
        process.start()
        assert process.first_key is not None
        environment = PhonicEnvironment(base=f"{process.http}/v1", production=process.ws)
        with httpx.Client(timeout=10) as http:
            yield Phonic(api_key=process.first_key, environment=environment, httpx_client=http)
    finally:
        process.ensure_stopped()


def test_sdk_builtin_tool_names_keypad_and_silence_work(client: Phonic, chat: ChatServer) -> None:
    created = client.agents.create(
        name="sdk-builtins",
        system_prompt="You call phone menus.",
        welcome_message=None,
        tools=["keypad_input", "choose_not_to_respond"],
    )
    assert client.agents.get(created.id).agent.tools == ["keypad_input", "choose_not_to_respond"]
    keys = Call("keypad_input", [json.dumps({"digits": "4#"})], id="call_k")
    chat.script.rounds.append(Round(text=["Choosing billing."], calls=[keys]))
    chat.script.rounds.append(Round(text=[]))
    chat.script.rounds.append(Round(calls=[Call("choose_not_to_respond", ["{}"], id="call_s")]))

    with client.conversations.connect() as socket:
        socket.send_config(
            ConfigPayload(agent="sdk-builtins", input_format="pcm_16000", output_format="pcm_16000")
        )
        next_of(socket, ReadyToStartConversationPayload)
        socket.send_generate_reply(GenerateReplyPayload(user_message="Press 4 for billing."))
        dtmf = next_of(socket, DtmfPayload)
        next_of(socket, AssistantFinishedSpeakingPayload)
        socket.send_generate_reply(GenerateReplyPayload(user_message="Please hold."))
        seen = []
        for _, message in zip(range(MAX_MESSAGES), socket, strict=False):
            seen.append(message)
            if isinstance(message, AssistantChoseNotToRespondPayload):
                break

    assert dtmf.digits == "4#"
    assert isinstance(seen[-1], AssistantChoseNotToRespondPayload)
    assert not any(isinstance(message, AudioChunkResponsePayload) for message in seen)
    offered = [tool["function"]["name"] for tool in chat.requests[-1].body["tools"]]
    assert offered == ["keypad_input", "choose_not_to_respond"]
