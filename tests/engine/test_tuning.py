"""An agent's tuning of the engine (API.md section 17; engine/tuning.py): the generated
welcome and whether speech cuts it, the voice's pace, the pronunciation dictionary, the
local time told to the model, and the VAD settings. In-process engines: the tone voice
(cheap) or hibari where the audio itself is the point, and the OpenAI-protocol test server
where the model is."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import pytest
from tests import speech
from tests.engine.conftest import ToneSynthesizer
from tests.engine.recorder import Recorder
from tests.llm_server import ChatServer, running_chat_server

from parley.engine import (
    AgentTuning,
    AssistantFinishedSpeaking,
    AudioChunk,
    ChatCompletionReplies,
    DefaultEngine,
    DefaultEngineFactory,
    EngineSettings,
    HibariSynthesizer,
    InputText,
    InterruptedResponse,
    ReplyGenerator,
    SessionConfig,
    Synthesizer,
    UserFinishedSpeaking,
    UserStartedSpeaking,
)
from parley.engine.semantic import SemanticParams
from parley.engine.tuning import (
    WELCOME_INSTRUCTION,
    Pronouncer,
    listening,
    local_time,
    with_local_time,
)
from parley.engine.vad import Transition, TurnDetector, VadParams

pytestmark = pytest.mark.anyio

FAST = EngineSettings(playback_lead_s=None)
PACED = EngineSettings(playback_lead_s=0.05)
SENTENCE = "Hello there, how are you today?"


class FixedClock:
    """A wall clock stopped at one moment (the monotonic clock runs)."""

    def __init__(self, unix_time: float) -> None:
        self._time = unix_time

    def time(self) -> float:
        return self._time

    def monotonic(self) -> float:
        return anyio.current_time()


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    with running_chat_server() as server:
        yield server


@asynccontextmanager
async def running(
    synthesizer: Synthesizer,
    config: SessionConfig,
    settings: EngineSettings = FAST,
    replies: ReplyGenerator | None = None,
    clock: FixedClock | None = None,
) -> AsyncIterator[tuple[DefaultEngine, Recorder]]:
    recorder = Recorder()
    factory = DefaultEngineFactory(synthesizer, replies=replies, settings=settings, clock=clock)
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        yield engine, recorder
        await engine.close()


def tuned(config: SessionConfig, **tuning: object) -> SessionConfig:
    return dataclasses.replace(config, tuning=AgentTuning(**tuning))  # type: ignore[arg-type]


def audio_seconds(recorder: Recorder, config: SessionConfig) -> float:
    audio = b"".join(e.audio for e in recorder.events if isinstance(e, AudioChunk))
    return config.output_format.duration(audio)


# --- audio_speed ---------------------------------------------------------------------------


async def test_engine_audio_speed_two_speaks_a_sentence_in_measurably_less_time(
    hibari: HibariSynthesizer, config: SessionConfig
) -> None:
    seconds: dict[float, float] = {}
    for speed in (1.0, 2.0):
        async with running(hibari, tuned(config, speed=speed)) as (engine, recorder):
            await engine.say(SENTENCE)
            await recorder.wait_for(AssistantFinishedSpeaking)
        seconds[speed] = audio_seconds(recorder, config)
    assert seconds[2.0] < 0.7 * seconds[1.0], seconds


async def test_hibari_audio_speed_half_speaks_longer(hibari: HibariSynthesizer) -> None:
    normal = await hibari.synthesize(SENTENCE, voice="heart")
    slow = await hibari.synthesize(SENTENCE, voice="heart", speed=0.5)
    assert slow.size > 1.5 * normal.size


# --- pronunciation_dictionary -------------------------------------------------------------


async def test_engine_pronunciation_dictionary_rewrites_the_synthesizer_input_not_the_text(
    config: SessionConfig,
) -> None:
    voice = ToneSynthesizer()
    config = tuned(config, pronunciations=(("Acme", "Ack-mee"), ("SQL", "sequel")))
    async with running(voice, config) as (engine, recorder):
        await engine.say("Welcome to ACME. We speak sql and acmes.")
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert voice.said == ["Welcome to Ack-mee.", "We speak sequel and acmes."]
    assert recorder.sentences() == ["Welcome to ACME.", "We speak sql and acmes."]


def test_pronouncer_whole_words_any_case_longest_first() -> None:
    say = Pronouncer([("New", "Noo"), ("New York", "Noo Yawk"), ("C++", "C plus plus")])
    assert say("new york or New, in C++ (not C+++)") == (
        "Noo Yawk or Noo, in C plus plus (not C plus plus+)"
    )
    assert say("Renew the news") == "Renew the news"
    assert Pronouncer([])("unchanged") == "unchanged"


# --- generate_welcome_message ----------------------------------------------------------------


async def test_engine_generate_welcome_the_model_writes_it_and_it_is_spoken_first(
    chat: ChatServer, config: SessionConfig
) -> None:
    chat.script.reply = ["Good morning, this is Acme. ", "What can I do for you?"]
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key="k", model="m")
    config = tuned(
        dataclasses.replace(config, welcome_message="The stored welcome."), generate_welcome=True
    )
    async with running(ToneSynthesizer(), config, replies=replies) as (_, recorder):
        await recorder.wait_for(AssistantFinishedSpeaking)
    await replies.aclose()
    assert recorder.sentences() == ["Good morning, this is Acme.", "What can I do for you?"]
    (request,) = chat.requests
    assert request.body["messages"] == [
        {"role": "system", "content": config.system_prompt},
        {"role": "system", "content": WELCOME_INSTRUCTION},
    ]


async def test_engine_generate_welcome_without_a_model_greets_generically(
    config: SessionConfig,
) -> None:
    config = tuned(
        dataclasses.replace(config, welcome_message="The stored welcome."), generate_welcome=True
    )
    async with running(ToneSynthesizer(), config) as (_, recorder):
        await recorder.wait_for(AssistantFinishedSpeaking)
    spoken = " ".join(recorder.sentences())
    assert spoken.endswith("How can I help you?")
    assert "stored welcome" not in spoken


async def test_engine_generate_welcome_held_is_written_when_released(
    chat: ChatServer, config: SessionConfig
) -> None:
    chat.script.reply = ["Hello, Acme calling."]
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key="k", model="m")
    config = tuned(dataclasses.replace(config, hold_welcome=True), generate_welcome=True)
    async with running(ToneSynthesizer(), config, replies=replies) as (engine, recorder):
        await anyio.sleep(0.2)
        assert chat.requests == []  # held: not written before the callee answers
        await engine.release_welcome()
        await recorder.wait_for(AssistantFinishedSpeaking)
    await replies.aclose()
    assert recorder.sentences() == ["Hello, Acme calling."]


# --- is_welcome_message_interruptible -----------------------------------------------------


async def barge_in_on_welcome(config: SessionConfig) -> Recorder:
    """The user speaks 0.1 s into a long welcome; the recorder of what followed."""
    welcome = "Welcome to Acme. " + "We have many things to tell you about today. " * 3
    config = dataclasses.replace(config, welcome_message=welcome)
    user = speech.stream(config.input_format, 0.0, speech.spoken(speech.SENTENCES[0]), 0.0)[:40]
    async with running(ToneSynthesizer(), config, PACED) as (engine, recorder):
        await recorder.wait_for(AudioChunk, count=2)
        await anyio.sleep(0.1)
        for chunk in user:
            await engine.feed_audio(chunk)
        await recorder.wait_for(UserStartedSpeaking)
        await recorder.wait_for_any(InterruptedResponse, AssistantFinishedSpeaking)
    return recorder


async def test_engine_welcome_not_interruptible_user_speech_does_not_cut_it(
    config: SessionConfig,
) -> None:
    recorder = await barge_in_on_welcome(tuned(config, welcome_interruptible=False))
    assert not any(isinstance(e, InterruptedResponse) for e in recorder.events)
    assert len(recorder.sentences()) == 4  # the whole welcome, after the user began


async def test_engine_welcome_interruptible_by_default_user_speech_cuts_it(
    config: SessionConfig,
) -> None:
    recorder = await barge_in_on_welcome(config)
    assert any(isinstance(e, InterruptedResponse) for e in recorder.events)
    assert not any(isinstance(e, AssistantFinishedSpeaking) for e in recorder.events)


# --- timezone ----------------------------------------------------------------------------------

MOMENT = datetime(2026, 12, 7, 23, 30, tzinfo=UTC).timestamp()


def test_local_time_names_the_zone_and_its_wall_clock() -> None:
    assert local_time(MOMENT, "Asia/Tokyo") == (
        "The local time is Tuesday, 8 December 2026, 08:30 (Asia/Tokyo)."
    )
    assert with_local_time("You help.", MOMENT, None) == "You help."
    assert with_local_time("", MOMENT, "UTC").startswith("The local time is Monday")


async def test_engine_timezone_the_model_is_told_the_local_time(
    chat: ChatServer, config: SessionConfig
) -> None:
    replies = ChatCompletionReplies(base_url=chat.base_url, api_key="k", model="m")
    config = tuned(config, timezone="America/New_York")
    async with running(ToneSynthesizer(), config, replies=replies, clock=FixedClock(MOMENT)) as (
        engine,
        recorder,
    ):
        await engine.generate_reply(user_message="What time is it?")
        await recorder.wait_for(AssistantFinishedSpeaking)
    await replies.aclose()
    system = chat.requests[0].body["messages"][0]
    assert system == {
        "role": "system",
        "content": config.system_prompt
        + "\n\nThe local time is Monday, 7 December 2026, 18:30 (America/New_York).",
    }


# --- vad_min_silence_duration_ms and vad_threshold ----------------------------------------


async def test_engine_vad_min_silence_longer_than_the_pause_keeps_the_turn_open(
    config: SessionConfig,
) -> None:
    # About 1 s of silence after the speech (the voice's own, then 0.5 s), and the 0.2 s
    # waited, which counts as silence too (engine/timing.py): short of 1.5 s.
    turn = speech.stream(config.input_format, 0.3, speech.spoken(speech.SENTENCES[0]), 0.5)
    for end_silence_ms, finished in ((None, True), (1_500, False)):
        async with running(ToneSynthesizer(), tuned(config, end_silence_ms=end_silence_ms)) as (
            engine,
            recorder,
        ):
            for chunk in turn:
                await engine.feed_audio(chunk)
            await recorder.wait_for(UserStartedSpeaking)
            await anyio.sleep(0.2)
        ended = any(isinstance(e, UserFinishedSpeaking | InputText) for e in recorder.events)
        assert ended is finished, end_silence_ms


def test_vad_threshold_speech_below_it_starts_no_turn() -> None:
    vad, _ = listening(VadParams(), SemanticParams(), AgentTuning(vad_threshold=0.8))
    assert (vad.threshold, vad.release_threshold) == (0.8, 0.56)
    probabilities = [0.7] * 20
    heard = TurnDetector(0.032, VadParams()).process(probabilities)
    assert [event.kind for event in heard] == [Transition.STARTED]
    assert TurnDetector(0.032, vad).process(probabilities) == []


def test_vad_min_silence_sets_the_end_of_turn_in_either_mode() -> None:
    semantic = SemanticParams()
    vad, model = listening(VadParams(), semantic, AgentTuning(end_silence_ms=900))
    assert vad.end_silence_ms == 900
    assert model == dataclasses.replace(semantic, max_silence_ms=900)
    vad, model = listening(VadParams(), semantic, AgentTuning(end_silence_ms=300))
    assert (vad.end_silence_ms, model) == (300, None)  # shorter than the model's check
    vad, model = listening(VadParams(), semantic, AgentTuning(end_silence_ms=100))
    assert (vad.end_silence_ms, vad.pause_ms) == (100, 96)
    assert listening(VadParams(), semantic, AgentTuning()) == (VadParams(), semantic)
