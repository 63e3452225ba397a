"""Speech played over the agent's reply, at real-time pace, for the interruption tests and
bench/interruptions.py (API.md section 18).

The agent speaks a long reply (`REPLY`); once its audio is on air the user's audio (silence,
then the speech or noise) is fed to the engine in 20 ms chunks, each when its time comes, as
a caller's would arrive. `Overlap` holds what happened, on the engine's monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import numpy as np

from parley.engine import (
    AssistantFinishedSpeaking,
    AssistantPaused,
    AssistantResumed,
    AudioChunk,
    AudioFormat,
    ConversationEngine,
    InputText,
    InterruptedResponse,
    Samples,
)
from tests import speech
from tests.engine.recorder import Recorder

REPLY = (
    "Thank you for calling, I can certainly help you with that today. "
    "Your order was placed on Monday and it left our warehouse on Tuesday morning. "
    "The courier expects to deliver it by Thursday afternoon at the latest. "
    "If it does not arrive by then, you can call us again and we will send a new one. "
    "Is there anything else I can do for you while I have you on the line?"
)
BACKCHANNELS = ("Uh-huh.", "Yeah.", "Right.", "Okay.", "Sure.", "I see.", "Got it.", "Yep.")
SHORT = "Wait."
LONG = "Hold on, I have a question about my order."
CHUNK_S = 0.02
LEAD_IN_S = 1.0
"""The agent's audio heard before the user speaks."""
AFTER_S = 1.6
"""The silence fed after the user's sound."""
ONSET_LEVEL = 0.02
"""A sample this loud marks where the user's sound begins."""


@dataclass
class Overlap:
    """What the engine did with one sound played over its reply."""

    kinds: list[type]
    onset_at: float
    """When the chunk holding the sound's first loud sample was fed (monotonic)."""
    paused_at: float | None
    """When the agent's audio stopped: paused, or interrupted outright."""
    interrupted: InterruptedResponse | None
    resumed: bool
    finished: bool
    sentences: list[str]
    heard: list[str]
    """InputText's words."""

    @property
    def stop_ms(self) -> float | None:
        """From the sound's onset to the agent's audio pausing."""
        if self.paused_at is None:
            return None
        return (self.paused_at - self.onset_at) * 1000


def noise_burst(seconds: float = 0.25, seed: int = 0) -> Samples:
    """A burst that the VAD takes for a voice but holds no word: a word's audio played
    backwards under a rough envelope (a cough, a mumble through a door)."""
    rng = np.random.default_rng(seed)
    word = speech.spoken(speech.SENTENCES[seed % len(speech.SENTENCES)])[::-1]
    start = int(rng.integers(0, max(word.size - int(seconds * speech.RATE), 1)))
    burst = word[start : start + int(seconds * speech.RATE)].copy()
    return (burst * np.hanning(burst.size)).astype(np.float32)


async def over_agent(
    engine: ConversationEngine,
    recorder: Recorder,
    sound: Samples,
    *,
    fmt: AudioFormat,
    rate: int = speech.RATE,
    after_s: float = AFTER_S,
    settle_s: float = 12.0,
) -> Overlap:
    """Have the agent say REPLY, play `sound` (at `rate`) over it in real time, then wait
    for the reply to end (finished or interrupted)."""
    await engine.say(REPLY)
    await recorder.wait_for(AudioChunk)
    if rate != speech.RATE:
        from parley.engine.audio import resample

        sound = resample(sound, rate, speech.RATE)
    loud = np.flatnonzero(np.abs(sound) >= ONSET_LEVEL)
    onset_chunk = round((LEAD_IN_S + (loud[0] if loud.size else 0) / speech.RATE) / CHUNK_S)
    chunks = speech.stream(fmt, LEAD_IN_S, sound, after_s)
    started = anyio.current_time()
    onset_at = started
    for index, chunk in enumerate(chunks):
        await anyio.sleep(max(started + index * CHUNK_S - anyio.current_time(), 0.0))
        await engine.feed_audio(chunk)
        if index == onset_chunk:
            onset_at = anyio.current_time()
    await seen(recorder, (AssistantFinishedSpeaking, InterruptedResponse), settle_s)
    if any(isinstance(e, InterruptedResponse) for e in recorder.events):
        await seen(recorder, (InputText,), settle_s)  # the interruption's own turn: its words
    events = recorder.events
    stops = (AssistantPaused, InterruptedResponse)  # an engine that does not pause stops
    paused = [at for e, at in zip(events, recorder.times, strict=True) if isinstance(e, stops)]
    interrupted = next((e for e in events if isinstance(e, InterruptedResponse)), None)
    return Overlap(
        kinds=recorder.kinds(),
        onset_at=onset_at,
        paused_at=paused[0] if paused else None,
        interrupted=interrupted,
        resumed=any(isinstance(e, AssistantResumed) for e in events),
        finished=any(isinstance(e, AssistantFinishedSpeaking) for e in events),
        sentences=recorder.sentences(),
        heard=[e.text for e in events if isinstance(e, InputText)],
    )


async def seen(recorder: Recorder, kinds: tuple[type, ...], seconds: float) -> bool:
    """Wait up to `seconds` (a loaded machine is slow) for an event of one of `kinds`."""
    with anyio.move_on_after(seconds):
        while not any(isinstance(event, kinds) for event in recorder.events):  # noqa: ASYNC110
            await anyio.sleep(0.02)  # polled: the Recorder's own wait gives up at 10 s
        return True
    return False
