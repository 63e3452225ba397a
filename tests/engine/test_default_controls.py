"""The engine's part of the socket's `add_system_message` and `input_cancelled` (API.md
section 17): a system note joins the model's history where it stands, with no reply, and
speech that brings no words ends with InputCancelled."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager

import anyio
import numpy as np
import pytest
from tests import speech
from tests.engine.recorder import Recorder

from parley.engine import (
    AssistantFinishedSpeaking,
    ConversationEngine,
    DefaultEngineFactory,
    EngineSettings,
    InputCancelled,
    InputText,
    ReplyPart,
    ReplyRequest,
    SessionConfig,
    Synthesizer,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
)
from parley.engine.replies.tool_calls import history_messages

pytestmark = pytest.mark.anyio
FAST = EngineSettings(playback_lead_s=None)


class AskedReplies:
    """Answers "Fine." and keeps every request it was asked."""

    def __init__(self) -> None:
        self.requests: list[ReplyRequest] = []

    def greeting(self, config: SessionConfig) -> str | None:
        return None

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        self.requests.append(request)
        yield "Fine."

    async def aclose(self) -> None:
        return None


@asynccontextmanager
async def running(
    synthesizer: Synthesizer, config: SessionConfig, replies: AskedReplies | None = None
) -> AsyncIterator[tuple[ConversationEngine, Recorder]]:
    recorder = Recorder()
    factory = DefaultEngineFactory(synthesizer, replies=replies, settings=FAST)
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        yield engine, recorder
        await engine.close()


async def test_engine_speech_too_short_for_words_input_cancelled(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    voice = speech.spoken("Hello, I need some help with my order.")
    start = int(np.argmax(np.abs(voice) > 0.02))
    cough = voice[start : start + 150 * 24]  # 150 ms of speech: a start, too short a turn
    async with running(tone_synthesizer, config) as (engine, recorder):
        for chunk in speech.stream(config.input_format, 0.3, cough, 0.9):
            await engine.feed_audio(chunk)
        await recorder.wait_for(InputCancelled)
    assert recorder.kinds() == [UserStartedSpeaking, UserFinishedSpeaking, InputCancelled]


async def test_engine_add_system_message_joins_history_without_reply(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    replies = AskedReplies()
    async with running(tone_synthesizer, config, replies) as (engine, recorder):
        await engine.generate_reply(user_message="Hello.")
        await recorder.wait_for(AssistantFinishedSpeaking)
        await engine.add_system_message("The caller is a premium member.")
        await engine.generate_reply(user_message="What am I?")
        await recorder.wait_for(AssistantFinishedSpeaking, count=2)
    assert len(replies.requests) == 2  # the note asked for no reply of its own
    assert InputText not in recorder.kinds()
    assert replies.requests[-1].history == (
        Turn("user", "Hello."),
        Turn("assistant", "Fine."),
        Turn("system", "The caller is a premium member."),
        Turn("user", "What am I?"),
    )


def test_history_messages_system_turn_is_a_system_message() -> None:
    turns = (Turn("user", "Hi."), Turn("system", "Be brief."))
    assert history_messages(turns) == [
        {"role": "user", "content": "Hi."},
        {"role": "system", "content": "Be brief."},
    ]
