"""The official `phonic` SDK's agent calls with the members of API.md section 17, unchanged,
against the app in-process (httpx's ASGI transport): `agents.create` with a name only, the
delivery members set by create, update and upsert and read back, the upsert's answer, and
the SDK's errors for a member Parley does not have and for a disabled agent."""

from __future__ import annotations

import pytest
from phonic import AsyncPhonic
from phonic.core.api_error import ApiError

pytestmark = [
    pytest.mark.anyio,
    # The SDK's conversations module imports websockets' legacy API, which warns on import.
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]


async def test_sdk_agents_create_with_a_name_only_takes_the_defaults(sdk: AsyncPhonic) -> None:
    created = await sdk.agents.create(name="plain")
    assert created.id.startswith("agent_")
    agent = (await sdk.agents.get("plain")).agent
    assert (agent.audio_speed, agent.timezone, agent.pronunciation_dictionary) == (1.0, None, [])
    assert (agent.generate_welcome_message, agent.is_welcome_message_interruptible) == (
        False,
        True,
    )
    assert (agent.vad_min_silence_duration_ms, agent.vad_threshold) == (None, None)
    assert (agent.push_to_talk, agent.tasks, agent.additional_voice_ids) == (False, [], [])


async def test_sdk_agents_create_update_with_the_delivery_members_read_back(
    sdk: AsyncPhonic,
) -> None:
    await sdk.agents.create(
        name="tuned",
        project="main",
        generate_welcome_message=True,
        is_welcome_message_interruptible=False,
        audio_speed=1.2,
        timezone="America/Los_Angeles",
        pronunciation_dictionary=[{"word": "Acme", "pronunciation": "Ack-mee"}],
        vad_min_silence_duration_ms=700,
        vad_threshold=0.6,
    )
    agent = (await sdk.agents.get("tuned")).agent
    assert agent.generate_welcome_message is True
    assert agent.is_welcome_message_interruptible is False
    assert (agent.audio_speed, agent.timezone) == (1.2, "America/Los_Angeles")
    assert [(e.word, e.pronunciation) for e in agent.pronunciation_dictionary] == [
        ("Acme", "Ack-mee")
    ]
    assert (agent.vad_min_silence_duration_ms, agent.vad_threshold) == (700, 0.6)

    await sdk.agents.update(
        "tuned", audio_speed=0.8, timezone="Europe/Paris", is_welcome_message_interruptible=True
    )
    agent = (await sdk.agents.get("tuned")).agent
    assert (agent.audio_speed, agent.timezone) == (0.8, "Europe/Paris")
    assert agent.is_welcome_message_interruptible is True
    assert agent.generate_welcome_message is True  # not given: unchanged
    assert agent.vad_threshold == 0.6


async def test_sdk_agents_upsert_inserts_then_updates(sdk: AsyncPhonic) -> None:
    first = await sdk.agents.upsert(
        name="desk",
        project="main",
        system_prompt="You are the desk.",
        timezone="Asia/Tokyo",
        audio_speed=1.5,
    )
    assert (first.inserted, first.updated) == (True, False)
    assert (first.agent.name, first.agent.timezone, first.agent.audio_speed) == (
        "desk",
        "Asia/Tokyo",
        1.5,
    )
    second = await sdk.agents.upsert(name="desk", project="main", vad_threshold=0.4)
    assert (second.inserted, second.updated) == (False, True)
    assert second.agent.id == first.agent.id
    assert (second.agent.timezone, second.agent.audio_speed, second.agent.vad_threshold) == (
        None,
        1.0,
        0.4,
    )
    assert second.agent.system_prompt == ""


async def test_sdk_agents_member_without_the_feature_is_a_bad_request_naming_it(
    sdk: AsyncPhonic,
) -> None:
    with pytest.raises(ApiError) as refused:
        await sdk.agents.create(name="noisy", background_noise="office")
    assert refused.value.status_code == 400
    assert refused.value.body["param_errors"] == {
        "background_noise": "is not supported: Parley does not have this feature"
    }


async def test_sdk_agents_upsert_disabled_agent_is_a_conflict(sdk: AsyncPhonic) -> None:
    await sdk.agents.upsert(name="off", project="main")
    await sdk.agents.disable("off")
    with pytest.raises(ApiError) as refused:
        await sdk.agents.upsert(
            name="off",
            project="main",
            audio_speed=2.0,
            request_options={"max_retries": 0},  # the SDK retries a 409 twice, seconds apart
        )
    assert refused.value.status_code == 409
    assert refused.value.body["error"]["code"] == "agent_disabled"


async def test_sdk_agents_update_answers_success_and_the_next_version(sdk: AsyncPhonic) -> None:
    await sdk.agents.create(name="versioned")
    first = await sdk.agents.update("versioned", system_prompt="One.")
    second = await sdk.agents.update("versioned", system_prompt="Two.")
    assert (first.success, first.version_number) == (True, 2)
    assert (second.success, second.version_number) == (True, 3)
    assert second.agent.system_prompt == "Two."
    replaced = await sdk.agents.upsert(name="versioned", system_prompt="Three.")
    assert replaced.updated is True
    third = await sdk.agents.update("versioned", system_prompt="Four.")
    assert third.version_number == 5  # the upsert's replacement was the fourth version
