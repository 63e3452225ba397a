from __future__ import annotations

import stat
import struct
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import numpy as np
import pytest

from parley.engine import (
    AudioFormat,
    EspeakSynthesizer,
    HibariSynthesizer,
    SynthesizerUnavailable,
    load_synthesizer,
)
from parley.engine.audio import decode, render
from parley.engine.synthesizers import WithLanguageVoices, parse_wav

SENTENCE = "Hello there, how are you today?"
LONG_TEXT = (
    "The quick brown fox jumps over the lazy dog while the band plays a slow, sad song about "
    "the long winter nights in the northern mountains, and everybody in the hall listens."
)


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", list(AudioFormat), ids=str)
async def test_hibari_sentence_in_each_format_audible_and_plausible(
    hibari: HibariSynthesizer, fmt: AudioFormat
) -> None:
    samples = await hibari.synthesize(SENTENCE, voice="heart")
    data = render(samples, hibari.sample_rate, fmt)
    decoded = decode(fmt, data)
    assert 1.0 <= fmt.duration(data) <= 4.0  # six words at a conversational pace
    assert rms(decoded) > 0.01
    assert np.max(np.abs(decoded)) < 1.0


@pytest.mark.anyio
async def test_hibari_same_sentence_same_audio(hibari: HibariSynthesizer) -> None:
    first = await hibari.synthesize("Same words.", voice="heart")
    second = await hibari.synthesize("Same words.", voice="heart")
    assert np.array_equal(first, second)


@pytest.mark.anyio
async def test_hibari_synthesize_concurrent_ticker_keeps_ticking(hibari: HibariSynthesizer) -> None:
    await hibari.warm_up()
    ticks = 0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.sleep(0.002)

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        start = ticks
        await hibari.synthesize(LONG_TEXT, voice="heart")
        during = ticks - start
        done.set()
    assert during >= 5  # a blocked event loop would not tick at all


@pytest.mark.parametrize(
    ("voice_id", "voice"),
    [("", "heart"), ("default", "heart"), ("heart", "heart"), ("HEART", "heart"),
     ("af_heart", "heart"), ("us_female", "heart"), ("no-such-voice", None)],
)  # fmt: skip
def test_hibari_resolve_voice_aliases(
    hibari: HibariSynthesizer, voice_id: str, voice: str | None
) -> None:
    assert hibari.resolve_voice(voice_id) == voice


def test_hibari_voice_not_on_disk_unavailable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HIBARI_HOME", str(tmp_path))  # an empty voice cache
    synthesizer = HibariSynthesizer()
    assert synthesizer.voices() == ("heart",)
    assert synthesizer.resolve_voice("emma") is None
    assert synthesizer.resolve_voice("us_male") is None  # fenrir is not bundled
    assert list(tmp_path.iterdir()) == []  # nothing was downloaded


def test_load_synthesizer_hibari_installed_preferred() -> None:
    synthesizer = load_synthesizer()
    assert synthesizer.default_voice == HibariSynthesizer.default_voice
    assert synthesizer.resolve_voice("us_female") == "heart"  # hibari's, not espeak-ng's


def test_load_synthesizer_espeak_installed_adds_a_voice_per_other_language() -> None:
    synthesizer = load_synthesizer()
    assert isinstance(synthesizer, WithLanguageVoices)
    assert {"heart", "espeak-de", "espeak-es"} <= set(synthesizer.voices())
    assert (synthesizer.language_of("heart"), synthesizer.language_of("espeak-de")) == ("en", "de")
    assert synthesizer.resolve_voice("en-us") is None  # espeak-ng's English stays out


def wav_bytes(samples: list[int], rate: int = 22_050, streaming: bool = True) -> bytes:
    data = struct.pack(f"<{len(samples)}h", *samples)
    size = 0x7FFFFFFF if streaming else len(data)  # espeak-ng's placeholder on stdout
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", size)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + (b"data" + struct.pack("<I", size) + data)
    )


@pytest.mark.parametrize("streaming", [True, False])
def test_parse_wav_mono_pcm16_samples_and_rate(streaming: bool) -> None:
    rate, samples = parse_wav(wav_bytes([0, 16384, -16384], streaming=streaming))
    assert rate == 22_050
    assert samples.tolist() == [0.0, 0.5, -0.5]


@pytest.mark.parametrize("data", [b"", b"RIFF\x00\x00\x00\x00WAVE", b"OggS" + bytes(40)])
def test_parse_wav_not_a_wav_raises(data: bytes) -> None:
    with pytest.raises(ValueError, match="WAV"):
        parse_wav(data)


@pytest.fixture
def fake_espeak(tmp_path: Path) -> Path:
    """A stand-in espeak-ng: one 16 kHz sample per input byte, WAV on stdout as espeak-ng does."""
    script = tmp_path / "espeak-ng"
    header = wav_bytes([], rate=16_000)
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "text = sys.stdin.buffer.read()\n"
        "assert sys.argv[1:] == ['--stdin', '--stdout', '-v', 'en-gb'], sys.argv\n"
        f"sys.stdout.buffer.write({header!r} + b'\\x00\\x20' * len(text))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.anyio
async def test_espeak_synthesize_fake_program_audio_resampled(fake_espeak: Path) -> None:
    synthesizer = EspeakSynthesizer(str(fake_espeak))
    assert synthesizer.resolve_voice("emma") == "en-gb"
    samples = await synthesizer.synthesize("x" * 1600, voice="en-gb")  # 0.1 s at 16 kHz
    assert samples.size == pytest.approx(2205, abs=1)
    assert float(np.median(samples)) == pytest.approx(0.25, abs=0.01)


def test_espeak_not_installed_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SynthesizerUnavailable):
        EspeakSynthesizer()


@pytest.mark.parametrize(
    ("voice_id", "voice"),
    [("", "en-us"), ("heart", "en-us"), ("fable", "en-gb"), ("EN-GB", "en-gb"),
     ("us_male", "en-us"), ("gb_female", "en-gb"), ("x", None)],
)  # fmt: skip
def test_espeak_resolve_voice_by_accent(
    fake_espeak: Path, voice_id: str, voice: str | None
) -> None:
    assert EspeakSynthesizer(str(fake_espeak)).resolve_voice(voice_id) == voice


@pytest.mark.anyio
async def test_espeak_audio_speed_sets_its_words_per_minute(tmp_path: Path) -> None:
    """espeak-ng's `-s` is 175 words a minute times the speed; 1.0 leaves it out."""
    script = tmp_path / "espeak-ng"
    header = wav_bytes([], rate=16_000)
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "sys.stdin.buffer.read()\n"
        "assert sys.argv[1:] == ['--stdin', '--stdout', '-v', 'en-us', '-s', '350'], sys.argv\n"
        f"sys.stdout.buffer.write({header!r} + b'\\x00\\x20' * 1600)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    samples = await EspeakSynthesizer(str(script)).synthesize("Fast.", voice="en-us", speed=2.0)
    assert samples.size == pytest.approx(2205, abs=1)
