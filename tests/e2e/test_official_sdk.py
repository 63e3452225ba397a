"""The official Phonic Python SDK (`phonic` 0.32.42), unchanged, against a real `parley serve`
(API.md section 12): agents, tools and a conversation read, asserted on the parsed objects.

The SDK appends paths such as `agents` to its environment's `base`, so Parley's base is
`http://127.0.0.1:PORT/v1`; it sends the API key as `Authorization: Bearer`.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from phonic import Phonic
from phonic.core.api_error import ApiError
from phonic.core.request_options import RequestOptions
from phonic.environment import PhonicEnvironment

from tests.faults.serve_process import ServeProcess

pytestmark = [
    pytest.mark.e2e,
    # The SDK's conversations module imports websockets' legacy API, which warns on import: the
    # SDK's own business, not Parley's (the tests run with warnings as errors).
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

NO_RETRY: RequestOptions = {"max_retries": 0}
"""For a call whose expected answer is a 409: the SDK retries those twice by default,
seconds apart, and the answer would be the same."""

PARAMETERS = [
    {"type": "string", "name": "city", "description": "The city", "is_required": True},
    {
        "type": "enum",
        "name": "unit",
        "description": "Unit",
        "is_required": False,
        "enum_values": ["c", "f"],
    },
]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """`parley serve` in embedded mode (SQLite, in-process stores) in an empty directory."""
    process = ServeProcess(tmp_path_factory.mktemp("sdk"))
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


def test_sdk_tools_create_list_get_update(client: Phonic) -> None:
    created = client.tools.create(
        name="weather",
        description="Looks up the weather.",
        type="custom_webhook",
        execution_mode="sync",
        endpoint_url="https://tools.example.com/weather",
        parameters=PARAMETERS,
    )
    assert created.id.startswith("tool_")
    assert created.name == "weather"
    assert (created.model_extra or {})["signing_secret"].startswith("whsec_")

    listed = client.tools.list()
    assert [tool.name for tool in listed.tools] == ["weather"]
    tool = client.tools.get("weather").tool
    assert tool.id == created.id
    assert tool.project.name == "main"
    assert tool.project.id.startswith("proj_")
    assert tool.type == "custom_webhook"
    assert tool.endpoint_method == "POST"
    assert tool.endpoint_timeout_ms == 5000
    assert isinstance(tool.parameters, list)
    assert [(p.name, p.type, p.is_required) for p in tool.parameters] == [
        ("city", "string", True),
        ("unit", "enum", False),
    ]
    assert tool.parameters[1].enum_values == ["c", "f"]

    updated = client.tools.update(created.id, description="Weather, now.")
    assert updated.success is True
    assert client.tools.get(created.id).tool.description == "Weather, now."


def test_sdk_transfer_tools_create_and_read_back_with_their_members(client: Phonic) -> None:
    client.tools.create(
        name="front_desk",
        description="Put the caller through to the front desk.",
        type="built_in_transfer_to_phone_number",
        execution_mode="sync",
        phone_number="+14155550188",
        dtmf="12",
        use_agent_phone_number=True,
        post_transfer_message="A guest is calling.",
        on_transfer_no_answer="keep_retrying",
    )
    desk = client.tools.get("front_desk").tool
    assert desk.type == "built_in_transfer_to_phone_number"
    assert (desk.phone_number, desk.dtmf, desk.keep_listening) == ("+14155550188", "12", True)
    assert (desk.use_agent_phone_number, desk.detect_voicemail) == (True, False)
    assert desk.on_transfer_no_answer == "keep_retrying"
    client.tools.create(
        name="to_billing",
        description="Hand the conversation to billing.",
        type="built_in_transfer_to_agent",
        execution_mode="sync",
        agents_to_transfer_to=["billing"],
    )
    assert client.tools.get("to_billing").tool.agents_to_transfer_to == ["billing"]
    with pytest.raises(ApiError) as refused:
        client.tools.create(
            name="listening",
            description="x",
            type="built_in_transfer_to_phone_number",
            execution_mode="sync",
            detect_voicemail=True,
        )
    assert refused.value.status_code == 400
    assert refused.value.body["error"]["code"] == "not_supported"


def test_sdk_agents_create_list_get_update_delete(client: Phonic) -> None:
    client.tools.create(
        name="lookup",
        description="Looks up an order.",
        type="custom_websocket",
        execution_mode="async",
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
    )
    created = client.agents.create(
        name="support",
        system_prompt="You help {{name}}.",
        template_variables={"name": {"default_value": "our customer"}},
        tools=["lookup", "natural_conversation_ending"],
        boosted_keywords=["Parley"],
    )
    assert created.id.startswith("agent_")
    assert created.name == "support"

    listed = client.agents.list().agents
    assert [(a.name, a.project.name) for a in listed] == [("support", "main")]
    agent = client.agents.get("support").agent
    assert agent.id == created.id
    assert agent.project.id.startswith("proj_")
    assert agent.tools == ["lookup", "natural_conversation_ending"]
    assert agent.template_variables["name"].default_value == "our customer"
    assert agent.boosted_keywords == ["Parley"]
    assert agent.is_disabled is False

    updated = client.agents.update("support", system_prompt="You help {{ name }} politely.")
    assert updated.agent.system_prompt == "You help {{ name }} politely."
    assert updated.agent.project.name == "main"

    with pytest.raises(ApiError) as refused:
        client.tools.delete("lookup", request_options=NO_RETRY)
    assert refused.value.status_code == 409
    assert client.agents.delete("support").success is True
    assert client.tools.delete("lookup").success is True
    assert [a.name for a in client.agents.list().agents] == []


def test_sdk_agent_silence_fields_round_trip(client: Phonic) -> None:
    """API.md section 15: the SDK's `no_input_*` agent fields, sent and parsed."""
    client.agents.create(
        name="patient",
        no_input_poke_sec=5,
        no_input_poke_text="Hello, still with me?",
        no_input_end_conversation_sec=30,
    )
    agent = client.agents.get("patient").agent
    assert (agent.no_input_poke_sec, agent.no_input_end_conversation_sec) == (5, 30)
    assert agent.no_input_poke_text == "Hello, still with me?"
    updated = client.agents.update("patient", no_input_end_conversation_sec=3600).agent
    assert (updated.no_input_poke_sec, updated.no_input_end_conversation_sec) == (5, 3600)
    with pytest.raises(ApiError) as refused:
        client.agents.update("patient", no_input_poke_sec=601)
    assert refused.value.status_code == 400
    assert client.agents.delete("patient").success is True


def test_sdk_conversations_get(client: Phonic, serve: ServeProcess) -> None:
    client.agents.create(name="greeter")
    made = httpx.post(
        f"{serve.http}/v1/conversations",
        json={"agent": "greeter"},
        headers={"Authorization": f"Bearer {serve.first_key}"},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    conversation_id = made.json()["conversation"]["id"]

    conversation = client.conversations.get(conversation_id).conversation

    assert conversation.id == conversation_id
    assert conversation.project.name == "main"
    assert conversation.agent is not None
    assert conversation.agent.name == "greeter"
    assert conversation.template_variables == {}
    assert conversation.items == []
    assert conversation.analysis.latencies_ms == []
    assert conversation.analysis.interruptions_count == 0
    assert conversation.duration_ms is None
    assert conversation.ended_by is None


def test_sdk_voices_list_parses_the_installed_voices(client: Phonic) -> None:
    listed = client.voices.list()
    voices = {voice.id: voice for voice in listed.voices}
    assert voices["heart"].name == "Heart"
    assert (voices["heart"].model_extra or {})["language"] == "en"


def test_sdk_external_storage_policies_create_list_get_update_delete(client: Phonic) -> None:
    """API.md section 16: the SDK's policy calls, and an agent naming a policy."""
    created = client.external_storage_policies.create(
        name="archive",
        endpoint_url="https://s3.example.com",
        bucket="parley-recordings",
        access_key_id="AKIAPARLEYSDKTEST",
        secret_access_key="sdk-secret-access-key",
        key_prefix="calls/",
    )
    assert created.id.startswith("storage_")
    assert created.name == "archive"
    listed = client.external_storage_policies.list().external_storage_policies
    assert [(p.name, p.agent_count) for p in listed] == [("archive", 0)]
    assert "sdk-secret-access-key" not in str(listed)

    client.agents.create(name="archivist", external_storage_policy="archive")
    assert client.agents.get("archivist").agent.external_storage_policy == "archive"
    assert client.external_storage_policies.update(created.id, region="eu-west-1").success is True
    policy = client.external_storage_policies.get("archive").external_storage_policy
    assert (policy.id, policy.bucket, policy.region) == (
        created.id,
        "parley-recordings",
        "eu-west-1",
    )
    assert (policy.key_prefix, policy.addressing_style, policy.agent_count) == ("calls/", "path", 1)

    with pytest.raises(ApiError) as refused:
        client.external_storage_policies.delete("archive", request_options=NO_RETRY)
    assert refused.value.status_code == 409
    assert refused.value.body["error"]["code"] == "policy_in_use"
    assert client.agents.delete("archivist").success is True
    assert client.external_storage_policies.delete("archive").success is True
    assert client.external_storage_policies.list().external_storage_policies == []
