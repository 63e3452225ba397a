from __future__ import annotations

import numpy as np
import pytest

from parley.engine.audio import (
    MAX_INPUT_CHUNK_MS,
    AudioFormat,
    check_input_chunk,
    decode,
    encode,
    float_to_pcm16,
    mulaw_decode,
    mulaw_encode,
    pcm16_to_float,
    render,
    resample,
    split_chunks,
)
from parley.engine.errors import AudioChunkMisaligned, AudioChunkTooLong, UnknownAudioFormat

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)
ALL_CODES = np.arange(256, dtype=np.uint8)
RATES = (44_100, 24_000, 16_000, 8_000)


def sine(hz: float, rate: int, seconds: float = 0.5, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(round(rate * seconds)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[np.argmax(spectrum)])


@pytest.mark.parametrize(
    ("name", "rate", "width"),
    [
        ("pcm_44100", 44_100, 2),
        ("pcm_24000", 24_000, 2),
        ("pcm_16000", 16_000, 2),
        ("pcm_8000", 8_000, 2),
        ("mulaw_8000", 8_000, 1),
    ],
)
def test_audio_format_parse_known_name_has_rate_and_width(name: str, rate: int, width: int) -> None:
    fmt = AudioFormat.parse(name)
    assert (fmt.sample_rate, fmt.bytes_per_sample) == (rate, width)
    assert fmt.duration(bytes(rate * width // 10)) == pytest.approx(0.1)


def test_audio_format_parse_unknown_name_raises() -> None:
    with pytest.raises(UnknownAudioFormat) as caught:
        AudioFormat.parse("pcm_48000")
    assert caught.value.code == "unknown_audio_format"


@pytest.mark.parametrize("fmt", list(AudioFormat), ids=str)
def test_check_input_chunk_40_ms_accepted(fmt: AudioFormat) -> None:
    check_input_chunk(fmt, bytes(fmt.bytes_for(MAX_INPUT_CHUNK_MS)))


@pytest.mark.parametrize("fmt", list(AudioFormat), ids=str)
def test_check_input_chunk_one_sample_over_40_ms_raises(fmt: AudioFormat) -> None:
    data = bytes(fmt.bytes_for(MAX_INPUT_CHUNK_MS) + fmt.bytes_per_sample)
    with pytest.raises(AudioChunkTooLong, match="at most 40 ms") as caught:
        check_input_chunk(fmt, data)
    assert isinstance(caught.value, ValueError)
    assert caught.value.code == "audio_chunk_too_long"


def test_check_input_chunk_odd_pcm_bytes_raises() -> None:
    with pytest.raises(AudioChunkMisaligned):
        check_input_chunk(AudioFormat.PCM_16000, bytes(3))


def test_check_input_chunk_odd_mulaw_bytes_accepted() -> None:
    check_input_chunk(AudioFormat.MULAW_8000, bytes(3))


def test_pcm16_float_round_trip_exact() -> None:
    assert np.array_equal(float_to_pcm16(pcm16_to_float(ALL_INT16)), ALL_INT16)


def test_float_to_pcm16_out_of_range_clipped() -> None:
    samples = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32)
    assert float_to_pcm16(samples).tolist() == [-32768, -32768, 0, 32767, 32767]


def test_encode_pcm_little_endian() -> None:
    data = encode(AudioFormat.PCM_8000, np.array([0.5, -0.5], dtype=np.float32))
    assert data == b"\x00\x40\x00\xc0"


def test_decode_pcm_odd_bytes_raises() -> None:
    with pytest.raises(AudioChunkMisaligned):
        decode(AudioFormat.PCM_24000, bytes(5))


@pytest.mark.parametrize(
    ("code", "linear"),
    [(0x00, -32124), (0x01, -31100), (0x0F, -16764), (0x10, -15996), (0x7F, 0), (0x80, 32124),
     (0x8F, 16764), (0xF0, 120), (0xFE, 8), (0xFF, 0)],
)  # fmt: skip
def test_mulaw_decode_matches_g711_table(code: int, linear: int) -> None:
    assert int(mulaw_decode(np.array([code], dtype=np.uint8))[0]) == linear


@pytest.mark.parametrize(
    ("linear", "code"),
    [(0, 0xFF), (-1, 0x7F), (4, 0xFE), (100, 0xF2), (-100, 0x73), (1000, 0xCE), (-1000, 0x4E),
     (16000, 0x90), (32767, 0x80), (-32768, 0x00)],
)  # fmt: skip
def test_mulaw_encode_matches_g711_reference(linear: int, code: int) -> None:
    assert int(mulaw_encode(np.array([linear], dtype=np.int16))[0]) == code


def test_mulaw_encode_decoded_code_round_trip() -> None:
    codes = mulaw_encode(mulaw_decode(ALL_CODES))
    # 0x7F is "negative zero": it decodes to 0, which encodes as 0xFF.
    assert np.array_equal(codes[ALL_CODES != 0x7F], ALL_CODES[ALL_CODES != 0x7F])
    assert codes[0x7F] == 0xFF


def test_mulaw_encode_negative_is_ones_complement_mirror() -> None:
    assert np.array_equal(mulaw_encode(~ALL_INT16), mulaw_encode(ALL_INT16) ^ 0x80)


def test_mulaw_round_trip_error_within_half_step() -> None:
    x = np.arange(-32124, 32125, dtype=np.int16)
    codes = mulaw_encode(x)
    error = np.abs(mulaw_decode(codes).astype(np.int32) - x)
    segment = 7 - ((codes.astype(np.int32) & 0x7F) >> 4)
    assert np.all(error <= 4 << segment)


def test_mulaw_decode_monotonic_in_each_half() -> None:
    table = mulaw_decode(ALL_CODES).astype(np.int32)
    assert np.all(np.diff(table[:128]) > 0)
    assert np.all(np.diff(table[128:]) < 0)


@pytest.mark.parametrize("from_rate", RATES)
@pytest.mark.parametrize("to_rate", RATES)
def test_resample_tone_keeps_duration_pitch_and_level(from_rate: int, to_rate: int) -> None:
    out = resample(sine(440.0, from_rate), from_rate, to_rate)
    assert out.dtype == np.float32
    assert out.size == round(0.5 * to_rate)
    assert peak_hz(out, to_rate) == pytest.approx(440.0, abs=4.0)
    middle = out[out.size // 4 : -out.size // 4]
    assert np.sqrt(np.mean(middle**2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.02)


def test_resample_downsampling_filters_aliases() -> None:
    out = resample(sine(6000.0, 24_000), 24_000, 8_000)  # 6 kHz is above 8 kHz's Nyquist
    assert np.sqrt(np.mean(out**2)) < 0.01 * 0.5


def test_split_chunks_100_ms_last_shorter() -> None:
    fmt = AudioFormat.PCM_24000
    data = bytes(range(256)) * 40  # 10240 bytes = 5120 samples
    chunks = split_chunks(fmt, data, 100)
    assert [len(chunk) for chunk in chunks] == [4800, 4800, 640]
    assert b"".join(chunks) == data


@pytest.mark.parametrize("fmt", list(AudioFormat), ids=str)
def test_render_tone_decodes_to_same_tone(fmt: AudioFormat) -> None:
    data = render(sine(440.0, 24_000), 24_000, fmt)
    assert fmt.duration(data) == pytest.approx(0.5)
    decoded = decode(fmt, data)
    assert peak_hz(decoded, fmt.sample_rate) == pytest.approx(440.0, abs=4.0)
