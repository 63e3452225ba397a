"""Fixtures for the engine tests: the anyio backend, test audio, and synthesizers.

ToneSynthesizer is a deterministic stand-in for pipeline tests only; it is not a voice.
"""

from __future__ import annotations

import numpy as np
import pytest

from parley.engine import AudioFormat, HibariSynthesizer, Samples, SessionConfig


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ToneSynthesizer:
    """A 440 Hz tone, 60 ms per word (at least 200 ms) divided by the speed, at 16 kHz; it
    keeps every text it was given, in order (`said`)."""

    sample_rate = 16_000
    default_voice = "tone"

    def voices(self) -> tuple[str, ...]:
        return ("tone",)

    def resolve_voice(self, voice_id: str) -> str | None:
        return "tone" if voice_id in ("", "default", "tone") else None

    async def warm_up(self) -> None:
        return None

    def __init__(self) -> None:
        self.said: list[str] = []

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        if voice != "tone":
            raise ValueError(f"unresolved voice {voice!r}")
        self.said.append(text)
        seconds = max(0.06 * len(text.split()), 0.2) / speed
        return tone(seconds, self.sample_rate)


def tone(seconds: float, rate: int, amplitude: float = 0.3, hz: float = 440.0) -> Samples:
    """Return a sine tone."""
    t = np.arange(round(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.fixture
def tone_synthesizer() -> ToneSynthesizer:
    return ToneSynthesizer()


@pytest.fixture(scope="session")
def hibari() -> HibariSynthesizer:
    """The real hibari voice, loaded once for the whole test session."""
    return HibariSynthesizer()


@pytest.fixture
def config() -> SessionConfig:
    return SessionConfig(
        agent_name="support-bot",
        system_prompt="You are a friendly support agent for Acme. Keep answers short.",
        welcome_message=None,
        voice_id="",
        input_format=AudioFormat.PCM_16000,
        output_format=AudioFormat.PCM_16000,
    )
