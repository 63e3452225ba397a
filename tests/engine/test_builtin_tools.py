"""The engine's built-ins `keypad_input` and `choose_not_to_respond` (API.md section 15),
through DefaultEngine and a real OpenAI-protocol server on loopback (tests/llm_server.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import pytest
from tests.engine.recorder import Recorder
from tests.engine.test_tool_loop import PACED, RecordingRunner
from tests.llm_server import Call, ChatServer, Round, running_chat_server

from parley.engine import (
    AssistantChoseNotToRespond,
    AssistantFinishedSpeaking,
    AssistantStartedSpeaking,
    AudioChunk,
    ChatCompletionReplies,
    ConversationEngine,
    DefaultEngineFactory,
    KeypadPressed,
    SessionConfig,
    Synthesizer,
)
from parley.engine.dtmf import key_seconds
from parley.services.live.tools import KEYPAD_DEFINITION, SILENCE_DEFINITION

pytestmark = pytest.mark.anyio


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@asynccontextmanager
async def engine_with_built_ins(
    chat: ChatServer, synthesizer: Synthesizer, config: SessionConfig
) -> AsyncIterator[tuple[ConversationEngine, Recorder, RecordingRunner]]:
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key="k", model="m")
    factory = DefaultEngineFactory(synthesizer, replies=replies, settings=PACED)
    recorder = Recorder()
    runner = RecordingRunner(recorder)
    config = dataclasses.replace(config, tools=(KEYPAD_DEFINITION, SILENCE_DEFINITION))
    try:
        async with (
            factory.create(config, tool_runner=runner) as engine,
            anyio.create_task_group() as group,
        ):
            group.start_soon(recorder.consume, engine)
            yield engine, recorder, runner
            await engine.close()
    finally:
        await replies.aclose()


def keys(digits: str) -> Call:
    return Call("keypad_input", [json.dumps({"digits": digits})], id="call_k")


async def test_keypad_pressed_after_the_words_and_finished_waits_for_the_tones(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    digits = "0123456789*#"
    chat.script.rounds.extend([Round(text=["One moment."], calls=[keys(digits)]), Round()])
    async with engine_with_built_ins(chat, tone_synthesizer, config) as (engine, rec, runner):
        await engine.generate_reply(user_message="Press them all.")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert runner.calls == []  # the engine presses the keys itself
    kinds = rec.kinds()
    assert kinds == [AssistantStartedSpeaking, AudioChunk, KeypadPressed, AssistantFinishedSpeaking]
    assert KeypadPressed(digits) in rec.events
    pressed = rec.times[rec.events.index(KeypadPressed(digits))]
    finished = rec.times[rec.events.index(AssistantFinishedSpeaking())]
    assert finished - pressed >= key_seconds(digits) - 0.1  # the tones' playback time passes


async def test_keypad_only_reply_is_framed_as_a_response(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    chat.script.rounds.extend([Round(calls=[keys("1")]), Round()])
    async with engine_with_built_ins(chat, tone_synthesizer, config) as (engine, rec, _):
        await engine.generate_reply(user_message="Press one.")
        await rec.wait_for(AssistantFinishedSpeaking)
    assert rec.kinds() == [AssistantStartedSpeaking, KeypadPressed, AssistantFinishedSpeaking]


async def test_choose_not_to_respond_after_words_comes_after_finished(
    chat: ChatServer, tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    silence = Call("choose_not_to_respond", ["{}"], id="call_s")
    chat.script.rounds.append(Round(text=["Sure."], calls=[silence]))
    async with engine_with_built_ins(chat, tone_synthesizer, config) as (engine, rec, _):
        await engine.generate_reply(user_message="Wait a moment.")
        await rec.wait_for(AssistantChoseNotToRespond)
    assert rec.kinds() == [
        AssistantStartedSpeaking,
        AudioChunk,
        AssistantFinishedSpeaking,
        AssistantChoseNotToRespond,
    ]
    assert len(chat.requests) == 1
