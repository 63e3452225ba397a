"""Text spoken outside a conversation (engine/spoken.py): each sentence goes out as soon as
it is made, the next made meanwhile, and `wav_file` wraps PCM16 and mu-law."""

from __future__ import annotations

import io
import wave

import anyio
import pytest
from tests.engine.conftest import ToneSynthesizer

from parley.engine import AudioFormat, Samples, sentences_of, spoken, wav_file

pytestmark = pytest.mark.anyio


class SlowSynthesizer(ToneSynthesizer):
    """The tone, 50 ms of work a sentence, noting when each one starts and ends."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        self.log.append(f"start {text}")
        await anyio.sleep(0.05)
        self.log.append(f"made {text}")
        return await super().synthesize(text, voice=voice)


async def test_spoken_yields_each_sentence_before_the_next_is_made() -> None:
    synthesizer = SlowSynthesizer()
    sentences = sentences_of("One. Two. Three.")
    assert sentences == ["One.", "Two.", "Three."]
    got: list[str] = []
    stream = spoken(
        synthesizer, sentences, voice="tone", speed=1.0, output_format=AudioFormat.PCM_16000
    )
    async for audio in stream:
        assert len(audio) == 2 * 3_200  # 200 ms of tone at 16 kHz
        got.append(synthesizer.log[-1])
        await anyio.sleep(0.01)  # the caller sends it: meanwhile the next one is made
        got.append(synthesizer.log[-1])
    # Sentence one went out as soon as it was made, before two was; two was under way.
    assert got[:2] == ["made One.", "start Two."]
    assert synthesizer.log[-1] == "made Three."


async def test_spoken_left_early_cancels_the_next_sentence() -> None:
    synthesizer = SlowSynthesizer()
    stream = spoken(
        synthesizer,
        ["One.", "Two.", "Three."],
        voice="tone",
        speed=1.0,
        output_format=AudioFormat.PCM_8000,
    )
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    await anyio.sleep(0.1)
    assert "made Two." not in synthesizer.log
    assert not any("Three." in line for line in synthesizer.log)


def test_wav_file_pcm_reads_back_with_wave() -> None:
    audio = bytes(range(200))
    with wave.open(io.BytesIO(wav_file(audio, AudioFormat.PCM_24000))) as file:
        assert (file.getnchannels(), file.getsampwidth(), file.getframerate()) == (1, 2, 24_000)
        assert file.readframes(file.getnframes()) == audio


def test_wav_file_mulaw_format_tag_7_at_8000() -> None:
    made = wav_file(b"\xff" * 81, AudioFormat.MULAW_8000)
    assert made[20:22] == (7).to_bytes(2, "little")
    assert int.from_bytes(made[24:28], "little") == 8_000
    assert int.from_bytes(made[34:36], "little") == 8  # bits a sample
    assert len(made) % 2 == 0  # padded to an even size
    assert int.from_bytes(made[4:8], "little") == len(made) - 8
