"""The session configured by its agent's configuration endpoint (API.md section 17), through
the codec seam without uvicorn (tests/services/test_live_session.py's doubles): what the
engine is built with is the answer's, the welcome, prompt, keywords and tools included; a
refused start never builds an engine. The endpoint is a real receiver on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest

from parley.outbound import AddressPolicy
from parley.records import OPERATOR, AgentSpec, ConfigurationEndpointSpec
from parley.services import Context, agents, conversations
from tests.factories import make_org, unique_name
from tests.services.test_live_session import Start, start_sessions
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

pytestmark = pytest.mark.anyio


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as server:
        yield server


@pytest.fixture
async def local_start(ctx: Context) -> AsyncIterator[tuple[Context, Start]]:
    """Sessions whose outbound calls may reach the receiver (http on loopback)."""
    local = replace(
        ctx, outbound_policy=AddressPolicy(allow_http=True, allow_private_networks=True)
    )
    async with start_sessions(local) as begin:
        yield local, begin


async def configured_agent(ctx: Context, org_id: str, receiver: WebhookReceiver) -> str:
    spec = AgentSpec(
        name=unique_name("agent"),
        voice_id="us_female",
        system_prompt="The agent's prompt.",
        welcome_message="The agent's welcome.",
        language="en",
        audio_format="pcm_16000",
        phone_numbers=(),
        boosted_keywords=("agent-word",),
        configuration_endpoint=ConfigurationEndpointSpec(url=receiver.url("/config")),
    )
    made = await agents.create_agent(ctx, org_id=org_id, project=None, spec=spec, actor=OPERATOR)
    return made.name


async def test_live_configuration_answer_builds_the_engine(
    local_start: tuple[Context, Start], receiver: WebhookReceiver
) -> None:
    ctx, start = local_start
    receiver.script(
        Reply.json(
            {
                "welcome_message": None,
                "system_prompt": "The endpoint's prompt.",
                "tools": ["natural_conversation_ending"],
                "boosted_keywords": ["Chez Ada", "bouillabaisse"],
            }
        )
    )
    org = await make_org(ctx)
    live = await start(org=org, agent=await configured_agent(ctx, org.org.id, receiver))
    await live.configure()
    config = live.engine.config
    assert config.system_prompt == "The endpoint's prompt."
    assert not config.welcome_message  # null: no welcome
    assert config.keywords == ("Chez Ada", "bouillabaisse")
    assert [tool.name for tool in config.tools] == ["natural_conversation_ending"]


async def test_live_configuration_config_overrides_sent_then_answer_wins(
    local_start: tuple[Context, Start], receiver: WebhookReceiver
) -> None:
    ctx, start = local_start
    receiver.script(Reply.json({"welcome_message": "The endpoint's welcome."}))
    org = await make_org(ctx)
    live = await start(org=org, agent=await configured_agent(ctx, org.org.id, receiver))
    await live.configure(system_prompt="The config's prompt.", welcome_message="The config's.")
    (call,) = receiver.requests
    sent = call.json()["agent"]
    assert (sent["system_prompt"], sent["welcome_message"]) == (
        "The config's prompt.",
        "The config's.",
    )
    assert sent["boosted_keywords"] == ["agent-word"]
    config = live.engine.config
    assert config.system_prompt == "The config's prompt."  # not overridden by the answer
    assert config.welcome_message == "The endpoint's welcome."
    assert config.keywords == ("agent-word",)


async def test_live_configuration_failure_no_engine_conversation_ended(
    local_start: tuple[Context, Start], receiver: WebhookReceiver
) -> None:
    ctx, start = local_start
    receiver.script(Reply.text("not json"))
    org = await make_org(ctx)
    live = await start(org=org, agent=await configured_agent(ctx, org.org.id, receiver))
    live.socket.push({"type": "config", "agent": live.agent})
    created = await live.socket.message("conversation_created")
    error = await live.socket.message("error")
    assert error["error"]["code"] == "configuration_endpoint_invalid_response"
    assert await live.closed() == (1011, "configuration_endpoint_invalid_response")
    assert live.factory.engines == []
    assert "ready_to_start_conversation" not in [m["type"] for m in live.socket.messages()]
    found = await conversations.get_conversation(
        ctx, org_id=org.org.id, conversation_id=created["conversation_id"]
    )
    assert (found.status, found.ended_by) == ("ended", "configuration_endpoint_invalid_response")
