from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager

import anyio
import numpy as np
import pytest
from tests import speech
from tests.engine.recorder import Recorder

from parley.engine import (
    APOLOGY,
    AssistantEndedConversation,
    AssistantFinishedSpeaking,
    AssistantStartedSpeaking,
    AudioChunk,
    AudioChunkTooLong,
    AudioFormat,
    ConversationEngine,
    DefaultEngineFactory,
    EndConversation,
    EngineClosed,
    EngineFactory,
    EngineSettings,
    EngineWarning,
    HibariSynthesizer,
    InputText,
    InterruptedResponse,
    ReplyPart,
    ReplyRequest,
    SessionConfig,
    Synthesizer,
    TooManyPendingResponses,
    Transcript,
    Turn,
    UserFinishedSpeaking,
    UserStartedSpeaking,
    Utterance,
)
from parley.engine.audio import decode

FAST = EngineSettings(playback_lead_s=None)
HELLO = "Hello, I need some help with my order."
PLACEHOLDER = re.compile(r"\[speech \d+\.\d s\]")


def spoken_turn(fmt: AudioFormat, *, before: float = 0.3, after: float = 0.9) -> list[bytes]:
    """A spoken sentence between two silences, as 20 ms chunks in `fmt`."""
    return speech.stream(fmt, before, speech.spoken(HELLO), after)


@asynccontextmanager
async def running(
    synthesizer: Synthesizer, config: SessionConfig, settings: EngineSettings = FAST
) -> AsyncIterator[tuple[ConversationEngine, Recorder]]:
    recorder = Recorder()
    factory: EngineFactory = DefaultEngineFactory(synthesizer, settings=settings)
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        yield engine, recorder
        await engine.close()


TURN_KINDS = [
    UserStartedSpeaking,
    UserFinishedSpeaking,
    InputText,
    AssistantStartedSpeaking,
    AudioChunk,
    AssistantFinishedSpeaking,
]


@pytest.mark.anyio
async def test_engine_full_turn_events_in_order(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert recorder.kinds() == TURN_KINDS
    heard = next(e for e in recorder.events if isinstance(e, InputText))
    assert PLACEHOLDER.fullmatch(heard.text), heard
    chunks = [event for event in recorder.events if isinstance(event, AudioChunk)]
    assert chunks[0].text.startswith("I heard you, but I cannot make out words yet.")
    assert all(len(chunk.audio) <= 3200 for chunk in chunks)  # 100 ms of pcm_16000


@pytest.mark.anyio
async def test_engine_full_turn_real_voice_mulaw_audio(
    hibari: HibariSynthesizer, config: SessionConfig
) -> None:
    config = dataclasses.replace(
        config, input_format=AudioFormat.MULAW_8000, output_format=AudioFormat.MULAW_8000
    )
    async with running(hibari, config) as (engine, recorder):
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert recorder.kinds() == TURN_KINDS
    audio = b"".join(event.audio for event in recorder.events if isinstance(event, AudioChunk))
    speech = decode(AudioFormat.MULAW_8000, audio)
    assert speech.size / 8000 > 2.0
    assert float(np.sqrt(np.mean(speech**2))) > 0.01


@pytest.mark.anyio
async def test_engine_welcome_message_spoken_first(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    config = dataclasses.replace(config, welcome_message="Welcome to Acme. How can I help?")
    async with running(tone_synthesizer, config) as (_, recorder):
        await recorder.wait_for(AssistantFinishedSpeaking)
    texts = recorder.sentences()
    assert texts == ["Welcome to Acme.", "How can I help?"]


@pytest.mark.anyio
async def test_engine_say_speaks_exact_text(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.say("Your order ships today. Anything else?")
        await recorder.wait_for(AssistantFinishedSpeaking)
    texts = recorder.sentences()
    assert " ".join(texts) == "Your order ships today. Anything else?"


@pytest.mark.anyio
async def test_engine_generate_reply_user_message_answered(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.update_system_prompt("You are a pizza chef.")
        await engine.generate_reply(user_message="Do you deliver?")
        await recorder.wait_for(AssistantFinishedSpeaking)
    texts = recorder.sentences()
    assert texts == ["You said: Do you deliver.", "As a pizza chef, I am here to help."]


@pytest.mark.anyio
async def test_engine_goodbye_ends_conversation(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.generate_reply(user_message="Thanks, bye!")
        await recorder.wait_for(AssistantEndedConversation)
    assert recorder.kinds()[-2:] == [AssistantFinishedSpeaking, AssistantEndedConversation]


@pytest.mark.anyio
async def test_engine_unpaced_session_sends_its_audio_as_fast_as_it_is_made(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    """A test run's caller plays nothing (`SessionConfig.paced` False): a 6 s reply goes
    out whole long before 6 s, on an engine that paces everyone else."""
    paced = EngineSettings(playback_lead_s=0.05)
    unpaced = dataclasses.replace(config, paced=False)
    async with running(tone_synthesizer, unpaced, paced) as (engine, recorder):
        start = anyio.current_time()
        await engine.say(" ".join(["word"] * 100))  # 6 s of tone
        await recorder.wait_for(AssistantFinishedSpeaking)
        elapsed = anyio.current_time() - start
    assert elapsed < 2.0


@pytest.mark.anyio
async def test_engine_user_speaks_over_assistant_response_interrupted(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    paced = EngineSettings(playback_lead_s=0.05)
    long_text = "First sentence here. " + "Many more words follow in this second one. " * 4
    # Rendered before the response starts: the first rendering holds the event loop for
    # about half a second, which would let the whole second sentence play first.
    speech = spoken_turn(config.input_format, after=0.0)[:40]  # 0.8 s: speech starts
    async with running(tone_synthesizer, config, paced) as (engine, recorder):
        await engine.say(long_text)
        await engine.say("This queued one is dropped.")
        await recorder.wait_for(AudioChunk, count=3)  # into the second sentence
        await anyio.sleep(0.1)
        for chunk in speech:
            await engine.feed_audio(chunk)
        await recorder.wait_for(InterruptedResponse)
        await anyio.sleep(0.3)
    assert recorder.kinds() == [
        AssistantStartedSpeaking,
        AudioChunk,
        UserStartedSpeaking,
        InterruptedResponse,
    ]
    interrupted = recorder.events[-1]
    assert isinstance(interrupted, InterruptedResponse)
    sent = " ".join(recorder.sentences())
    assert interrupted.text.startswith("First sentence here.")
    assert long_text.startswith(interrupted.text)
    assert len(interrupted.text) < len(sent)  # what was sent but not yet played is not in it


@pytest.mark.anyio
async def test_engine_paced_response_lasts_its_playback_time(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    paced = EngineSettings(playback_lead_s=0.05)
    async with running(tone_synthesizer, config, paced) as (engine, recorder):
        start = anyio.current_time()
        await engine.say("one two three four five six seven eight nine ten")  # 0.6 s of tone
        await recorder.wait_for(AssistantFinishedSpeaking)
        elapsed = anyio.current_time() - start
    assert 0.55 <= elapsed < 2.0


@pytest.mark.anyio
async def test_engine_muted_speech_ignored(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.mute()
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await engine.unmute()
        await anyio.sleep(0.05)
    assert recorder.events == []


@pytest.mark.anyio
async def test_engine_mute_mid_speech_finishes_turn(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        for chunk in spoken_turn(config.input_format, after=0.0)[
            :50
        ]:  # 0.3 s silence, 0.7 s speech
            await engine.feed_audio(chunk)
        await engine.mute()
        await recorder.wait_for(InputText)
    assert recorder.kinds()[:3] == [UserStartedSpeaking, UserFinishedSpeaking, InputText]


@pytest.mark.anyio
async def test_engine_unknown_voice_warns_and_speaks(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    config = dataclasses.replace(config, voice_id="nobody", welcome_message="Hi.")
    async with running(tone_synthesizer, config) as (_, recorder):
        await recorder.wait_for(AssistantFinishedSpeaking)
    warning = recorder.events[0]
    assert isinstance(warning, EngineWarning)
    assert warning.code == "voice_not_available"
    assert "'nobody'" in warning.message
    assert AudioChunk in recorder.kinds()


@pytest.mark.anyio
async def test_engine_chunk_over_40_ms_rejected_engine_keeps_running(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        with pytest.raises(AudioChunkTooLong):
            await engine.feed_audio(bytes(2 * 16 * 41))
        await engine.say("Still here.")
        await recorder.wait_for(AssistantFinishedSpeaking)


@pytest.mark.anyio
async def test_engine_input_after_close_raises(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, _):
        await engine.close()
        with pytest.raises(EngineClosed):
            await engine.say("Too late.")


@pytest.mark.anyio
async def test_engine_real_synthesis_event_loop_keeps_ticking(
    hibari: HibariSynthesizer, config: SessionConfig
) -> None:
    await hibari.warm_up()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.002)

    async with running(hibari, config) as (engine, recorder), anyio.create_task_group() as group:
        group.start_soon(ticker)
        await engine.say(
            "This paragraph is long enough to keep the synthesizer busy for a while. "
            "Meanwhile, the event loop must keep serving the other tasks of the process."
        )
        await recorder.wait_for(AssistantFinishedSpeaking)
        group.cancel_scope.cancel()
    assert ticks >= 10  # about 70 ms of synthesis; a blocked loop ticks once per sentence


@pytest.mark.anyio
async def test_engine_too_many_queued_responses_refused(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    settings = EngineSettings(playback_lead_s=None, max_pending_responses=2)
    async with running(tone_synthesizer, config, settings) as (engine, _):
        await engine.say("One.")
        await engine.say("Two.")
        with pytest.raises(TooManyPendingResponses):
            await engine.say("Three.")


class EchoRecognizer:
    sample_rate = 8_000
    incremental = False

    async def warm_up(self) -> None:
        return None

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
    ) -> Transcript | None:
        assert (prefix, partial) == ("", False)
        assert utterance.sample_rate == 8_000
        expected = f" ({prompt})" if prompt else ""  # the keywords, to check they arrive
        return Transcript(f"I spoke for {utterance.speech_seconds:.1f} seconds{expected}", language)

    async def aclose(self) -> None:
        return None


class TokenReplies:
    """Streams its reply in pieces that do not follow sentence boundaries, like an LLM."""

    def greeting(self, config: SessionConfig) -> str | None:
        return config.welcome_message

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        assert request.history[-1] == Turn("user", request.user_message or "")
        for piece in ("Hel", "lo there. How", " are you", "? Bye."):
            yield piece
        yield EndConversation()

    async def aclose(self) -> None:
        return None


@pytest.mark.anyio
async def test_engine_plugged_recognizer_and_replies_used(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    factory = DefaultEngineFactory(
        tone_synthesizer, recognizer=EchoRecognizer(), replies=TokenReplies(), settings=FAST
    )
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantEndedConversation)
        await engine.close()
    heard = next(e for e in recorder.events if isinstance(e, InputText))
    assert re.fullmatch(r"I spoke for [12]\.\d seconds", heard.text), heard
    assert recorder.sentences() == ["Hello there.", "How are you?", "Bye."]


@pytest.mark.anyio
async def test_engine_agent_keywords_reach_the_recognizer_as_its_prompt(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    factory = DefaultEngineFactory(
        tone_synthesizer, recognizer=EchoRecognizer(), replies=TokenReplies(), settings=FAST
    )
    recorder = Recorder()
    keyed = dataclasses.replace(config, keywords=("Siobhan Quirke", "Kilbride Street"))
    async with factory.create(keyed) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        for chunk in spoken_turn(keyed.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantEndedConversation)
        await engine.close()
    heard = next(e for e in recorder.events if isinstance(e, InputText))
    assert heard.text.endswith(" seconds (Siobhan Quirke, Kilbride Street)"), heard


class HearsSpanishRecognizer(EchoRecognizer):
    """Records the language each decode was asked for; says it heard Spanish."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
    ) -> Transcript | None:
        self.asked.append(language)
        return Transcript("Hola.", "es")


@pytest.mark.anyio
async def test_engine_agent_language_reaches_the_recognizer_input_text_reports_heard_one(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    recognizer = HearsSpanishRecognizer()
    factory = DefaultEngineFactory(
        tone_synthesizer, recognizer=recognizer, replies=TokenReplies(), settings=FAST
    )
    recorder = Recorder()
    german = dataclasses.replace(config, language="de")
    async with factory.create(german) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        for chunk in spoken_turn(german.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantEndedConversation)
        await engine.close()
    assert recognizer.asked
    assert set(recognizer.asked) == {"de"}
    heard = next(e for e in recorder.events if isinstance(e, InputText))
    assert (heard.text, heard.language) == ("Hola.", "es")


class FailingRecognizer:
    sample_rate = 16_000
    incremental = False

    async def warm_up(self) -> None:
        return None

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
    ) -> Transcript | None:
        raise RuntimeError("recognizer crashed")

    async def aclose(self) -> None:
        return None


class FailingReplies:
    """Starts a reply, then fails mid-stream; a `say` (no generator) still works."""

    def greeting(self, config: SessionConfig) -> str | None:
        return None

    async def reply(self, request: ReplyRequest) -> AsyncGenerator[ReplyPart, None]:
        yield "Let me check. "
        raise RuntimeError("reply generator crashed")

    async def aclose(self) -> None:
        return None


@pytest.mark.anyio
async def test_engine_recognizer_failure_warns_and_conversation_goes_on(
    tone_synthesizer: Synthesizer,
    config: SessionConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    factory = DefaultEngineFactory(tone_synthesizer, recognizer=FailingRecognizer(), settings=FAST)
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(EngineWarning)
        await engine.say("Still here.")
        await recorder.wait_for(AssistantFinishedSpeaking)
        await engine.close()
    warnings = [event for event in recorder.events if isinstance(event, EngineWarning)]
    assert [warning.code for warning in warnings] == ["recognition_failed"]
    assert not any(isinstance(event, InputText) for event in recorder.events)
    assert recorder.sentences() == ["Still here."]
    assert "speech recognition failed" in caplog.text
    assert "recognizer crashed" in caplog.text  # the traceback is logged


@pytest.mark.anyio
async def test_engine_reply_failure_warns_finishes_turn_and_goes_on(
    tone_synthesizer: Synthesizer, config: SessionConfig, caplog: pytest.LogCaptureFixture
) -> None:
    factory = DefaultEngineFactory(tone_synthesizer, replies=FailingReplies(), settings=FAST)
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        await engine.generate_reply(user_message="Where is my order?")
        await recorder.wait_for(EngineWarning)
        await recorder.wait_for(AssistantFinishedSpeaking)
        await engine.say("Sorry about that.")
        await recorder.wait_for(AssistantFinishedSpeaking, count=2)
        await engine.close()
    warnings = [event for event in recorder.events if isinstance(event, EngineWarning)]
    assert [warning.code for warning in warnings] == ["response_failed"]
    assert recorder.sentences() == ["Let me check.", APOLOGY, "Sorry about that."]
    assert recorder.kinds().count(AssistantStartedSpeaking) == 2
    assert "a response failed" in caplog.text
    assert "reply generator crashed" in caplog.text


# --- a held welcome (a call placed to someone, API.md section 15) ---------------------------

HELD = "Hello, this is Acme calling about your order."


@pytest.mark.anyio
async def test_engine_hold_welcome_spoken_when_the_first_turn_ends_in_place_of_a_reply(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    config = dataclasses.replace(config, welcome_message=HELD, hold_welcome=True)
    async with running(tone_synthesizer, config) as (engine, recorder):
        await anyio.sleep(0.3)
        assert recorder.events == []  # nothing said before the callee speaks
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(InputText)
        await recorder.wait_for(AssistantFinishedSpeaking)
        await anyio.sleep(0.3)  # a reply to the turn would have started by now
    assert " ".join(recorder.sentences()) == HELD
    assert recorder.kinds().count(AssistantStartedSpeaking) == 1


@pytest.mark.anyio
async def test_engine_hold_welcome_release_speaks_it_once_or_drops_it(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    config = dataclasses.replace(config, welcome_message=HELD, hold_welcome=True)
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.release_welcome()
        await engine.release_welcome()  # held once: spoken once
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert " ".join(recorder.sentences()) == HELD
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.release_welcome(speak=False)
        for chunk in spoken_turn(config.input_format):
            await engine.feed_audio(chunk)
        await recorder.wait_for(AssistantFinishedSpeaking)
    assert HELD not in " ".join(recorder.sentences())  # the turn got a reply, not the welcome


@pytest.mark.anyio
async def test_engine_say_then_end_ends_the_conversation_and_nothing_follows(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async with running(tone_synthesizer, config) as (engine, recorder):
        await engine.say("Please call us back.", then_end=True)
        await engine.say("This is never said.")
        await recorder.wait_for(AssistantEndedConversation)
        await anyio.sleep(0.3)
    assert recorder.sentences() == ["Please call us back."]
    assert recorder.kinds()[-2:] == [AssistantFinishedSpeaking, AssistantEndedConversation]
