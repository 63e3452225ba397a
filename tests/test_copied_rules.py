"""Rules kept in one place: the audio formats (the engine's enum) and the agent defaults."""

from __future__ import annotations

import pytest

from parley.api.schemas import AgentCreate
from parley.engine import AudioFormat, UnknownAudioFormat
from parley.services import agents
from parley.web import forms


def test_api_audio_format_schema_lists_the_engine_formats() -> None:
    schema = AgentCreate.model_json_schema()["properties"]["audio_format"]
    assert schema["enum"] == list(AudioFormat.names())
    assert schema["default"] == agents.DEFAULT_AUDIO_FORMAT


def test_api_agent_defaults_are_the_services_defaults() -> None:
    agent = AgentCreate(name="a")
    assert (agent.voice_id, agent.language, agent.system_prompt, agent.audio_format) == (
        agents.DEFAULT_VOICE_ID,
        agents.DEFAULT_LANGUAGE,
        agents.DEFAULT_SYSTEM_PROMPT,
        agents.DEFAULT_AUDIO_FORMAT,
    )


def test_dashboard_audio_formats_are_the_engine_formats_default_first() -> None:
    assert forms.AUDIO_FORMATS[0] == agents.DEFAULT_AUDIO_FORMAT
    assert sorted(forms.AUDIO_FORMATS) == sorted(AudioFormat.names())


def test_unknown_audio_format_message_names_every_engine_format() -> None:
    with pytest.raises(UnknownAudioFormat) as caught:
        AudioFormat.parse("mp3")
    for name in AudioFormat.names():
        assert name in caught.value.message
