"""The end-of-turn model's late answer ends the turn when the engine runs as a server runs it.

Under uvicorn there is no anyio test runner: a bare asyncio loop callback has no current
task, and anyio refuses to start a task from one (NoEventLoopError, logged by the loop and
lost). The answer that came after the last chunk was heeded from such a callback, so over
`parley serve` such a turn never ended and the socket closed 1011. This test runs the
engine under plain `asyncio.run`, as uvicorn does.
"""

from __future__ import annotations

import asyncio

import anyio
from tests import speech
from tests.engine.recorder import Recorder

from parley.engine import (
    AudioFormat,
    DefaultEngineFactory,
    EngineSettings,
    InputText,
    SessionConfig,
    SmartTurn,
    Synthesizer,
    UserFinishedSpeaking,
)


def test_engine_late_end_of_turn_answer_ends_the_turn_under_plain_asyncio(
    tone_synthesizer: Synthesizer, config: SessionConfig
) -> None:
    async def scenario() -> Recorder:
        factory = DefaultEngineFactory(
            tone_synthesizer, settings=EngineSettings(playback_lead_s=None), turn_model=SmartTurn()
        )
        await factory.warm_up()
        recorder = Recorder()
        fmt = config.input_format
        try:
            async with factory.create(config) as engine, anyio.create_task_group() as group:
                group.start_soon(recorder.consume, engine)
                # A finished sentence and 0.4 s of silence, sent at once, then nothing: the
                # model answers after the last chunk (the silence is past its 300 ms already).
                for chunk in speech.stream(fmt, 0.3, speech.spoken(speech.SENTENCES[0]), 0.4):
                    await engine.feed_audio(chunk)
                with anyio.move_on_after(5):
                    await recorder.wait_for(InputText)
                await engine.close()
        finally:
            await factory.aclose()
        return recorder

    assert config.input_format is AudioFormat.PCM_16000
    recorder = asyncio.run(scenario())
    assert UserFinishedSpeaking in recorder.kinds()
    assert InputText in recorder.kinds()
