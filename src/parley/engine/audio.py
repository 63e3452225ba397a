"""Audio formats of API.md section 4: sizes, limits, PCM16 and G.711 mu-law codecs, resampling.

Samples inside the engine are mono float32 in [-1, 1]. PCM is 16-bit signed little-endian;
int16 <-> float uses the factor 32768 both ways, so int16 -> float -> int16 is exact.
Resampling is libsoxr (the `soxr` package, "HQ" quality): `resample` converts a whole
buffer (a synthesized sentence), and `StreamResampler` converts a stream chunk by chunk,
keeping the filter's state across chunks, so 20 ms pieces join without clicks or gaps.
"""

from __future__ import annotations

import enum
import io
import wave
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import soxr

from parley.engine.errors import AudioChunkMisaligned, AudioChunkTooLong, UnknownAudioFormat

Samples: TypeAlias = npt.NDArray[np.float32]
"""Mono audio as float32 in [-1, 1]."""

MAX_INPUT_CHUNK_MS = 40
"""Longest audio chunk a client may send (API.md section 8)."""

OUTPUT_CHUNK_MS = 100
"""Default duration of the audio chunks the engine sends (the last one of a sentence is shorter)."""

_PCM_SCALE = 32768.0


class AudioFormat(enum.StrEnum):
    """The wire audio formats: mono, 16-bit little-endian PCM or 8-bit G.711 mu-law."""

    PCM_44100 = "pcm_44100"
    PCM_24000 = "pcm_24000"
    PCM_16000 = "pcm_16000"
    PCM_8000 = "pcm_8000"
    MULAW_8000 = "mulaw_8000"

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The wire names of every format, in declaration order."""
        return tuple(member.value for member in cls)

    @classmethod
    def listed(cls) -> str:
        """The names as a sentence's list: `pcm_44100, ..., pcm_8000 or mulaw_8000`."""
        *head, last = cls.names()
        return f"{', '.join(head)} or {last}"

    @classmethod
    def parse(cls, name: str) -> AudioFormat:
        """Return the format called `name`; raise UnknownAudioFormat for any other name."""
        try:
            return cls(name)
        except ValueError:
            raise UnknownAudioFormat(f"Unknown audio format; use {cls.listed()}.") from None

    @property
    def sample_rate(self) -> int:
        """Samples per second."""
        return int(self.value.rsplit("_", 1)[1])

    @property
    def is_mulaw(self) -> bool:
        """True for G.711 mu-law, False for 16-bit PCM."""
        return self is AudioFormat.MULAW_8000

    @property
    def bytes_per_sample(self) -> int:
        """2 for PCM, 1 for mu-law."""
        return 1 if self.is_mulaw else 2

    def samples_in(self, data: bytes) -> int:
        """Return the number of samples in `data`; raise AudioChunkMisaligned on odd PCM sizes."""
        if len(data) % self.bytes_per_sample:
            raise AudioChunkMisaligned()
        return len(data) // self.bytes_per_sample

    def duration(self, data: bytes) -> float:
        """Return the duration of `data` in seconds."""
        return self.samples_in(data) / self.sample_rate

    def bytes_for(self, milliseconds: int) -> int:
        """Return the size in bytes of `milliseconds` of audio (rounded down to whole samples)."""
        return self.sample_rate * milliseconds // 1000 * self.bytes_per_sample


def check_input_chunk(fmt: AudioFormat, data: bytes) -> None:
    """Raise AudioChunkTooLong above 40 ms, AudioChunkMisaligned for odd-sized PCM."""
    if fmt.samples_in(data) * 1000 > fmt.sample_rate * MAX_INPUT_CHUNK_MS:
        raise AudioChunkTooLong(
            f"An audio chunk may hold at most {MAX_INPUT_CHUNK_MS} ms of audio; this one holds "
            f"{fmt.duration(data) * 1000:.1f} ms of {fmt.value}."
        )


def decode(fmt: AudioFormat, data: bytes) -> Samples:
    """Decode wire bytes to float samples; raise AudioChunkMisaligned on odd-sized PCM."""
    fmt.samples_in(data)
    if fmt.is_mulaw:
        pcm = mulaw_decode(np.frombuffer(data, dtype=np.uint8))
    else:
        pcm = np.frombuffer(data, dtype="<i2")
    return pcm16_to_float(pcm)


def encode(fmt: AudioFormat, samples: Samples) -> bytes:
    """Encode float samples (at fmt's rate) to wire bytes; values outside [-1, 1] are clipped."""
    pcm = float_to_pcm16(samples)
    if fmt.is_mulaw:
        return mulaw_encode(pcm).tobytes()
    return pcm.astype("<i2").tobytes()


def render(samples: Samples, sample_rate: int, fmt: AudioFormat) -> bytes:
    """Resample float samples from `sample_rate` to fmt's rate and encode them."""
    return encode(fmt, resample(samples, sample_rate, fmt.sample_rate))


def wav(samples: Samples, sample_rate: int, to_rate: int) -> bytes:
    """A mono 16-bit PCM WAV file of float samples resampled to `to_rate` (what a carrier's
    `<Play>` plays)."""
    pcm = float_to_pcm16(resample(samples, sample_rate, to_rate)).astype("<i2").tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(to_rate)
        file.writeframes(pcm)
    return out.getvalue()


def split_chunks(fmt: AudioFormat, data: bytes, milliseconds: int = OUTPUT_CHUNK_MS) -> list[bytes]:
    """Split encoded audio into chunks of `milliseconds` each; the last one may be shorter."""
    size = fmt.bytes_for(milliseconds)
    if size <= 0:
        raise ValueError(f"a chunk of {milliseconds} ms holds no sample of {fmt.value}")
    return [data[start : start + size] for start in range(0, len(data), size)]


def pcm16_to_float(pcm: npt.NDArray[np.int16]) -> Samples:
    """Convert int16 samples to float32 in [-1, 1)."""
    return (pcm.astype(np.float32) / np.float32(_PCM_SCALE)).astype(np.float32)


def float_to_pcm16(samples: Samples) -> npt.NDArray[np.int16]:
    """Convert float samples to int16, rounding to nearest and clipping to the int16 range."""
    scaled = np.rint(np.asarray(samples, dtype=np.float64) * _PCM_SCALE)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def resample(samples: Samples, from_rate: int, to_rate: int) -> Samples:
    """Resample a whole buffer between any two positive rates (anti-aliased)."""
    if from_rate <= 0 or to_rate <= 0:
        raise ValueError("sample rates must be positive")
    if from_rate == to_rate or samples.size == 0:
        return np.asarray(samples, dtype=np.float32)
    out = soxr.resample(np.asarray(samples, dtype=np.float32), from_rate, to_rate, quality="HQ")
    return np.asarray(out, dtype=np.float32)


class StreamResampler:
    """Resamples one stream chunk by chunk; the filter state carries across chunks.

    The output lags the input by the filter's delay (a few milliseconds at "HQ"); the
    samples come out in order and sample n of the output is at time n / to_rate. `close`
    frees libsoxr's stream at the end of a conversation.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError("sample rates must be positive")
        self._identity = from_rate == to_rate
        self._closed = False
        self._stream = (
            None if self._identity else soxr.ResampleStream(from_rate, to_rate, 1, "float32", "HQ")
        )

    def close(self) -> None:
        """Free libsoxr's stream now (idempotent); `feed` then raises ValueError.

        Not left to the collector: a listener sits in reference cycles until a collection,
        and `python -m parley` freezes what is left at exit, so a stream not freed by then
        outlives the interpreter and nanobind prints "leaked" lines for it.
        """
        self._closed = True
        self._stream = None

    def feed(self, samples: Samples) -> Samples:
        """Return the output samples that the next input chunk completes."""
        if self._closed:
            raise ValueError("the resampler is closed")
        if self._stream is None:
            return np.asarray(samples, dtype=np.float32)
        out = self._stream.resample_chunk(np.asarray(samples, dtype=np.float32))
        return np.asarray(out, dtype=np.float32)


# --- G.711 mu-law (ITU-T G.711; same arithmetic as ITU-T G.191's ulaw_compress/expand) -----

_BIAS = 33  # 0x84 >> 2: the bias on the 14-bit magnitude
_MAX_MAGNITUDE = 0x1FFF


def mulaw_encode(pcm: npt.NDArray[np.int16]) -> npt.NDArray[np.uint8]:
    """Compress int16 samples to G.711 mu-law bytes.

    Negative samples use the one's complement (as G.191 does), so x and -x-1 differ only in
    the sign bit; 0 encodes to 0xFF and full scale to 0x80 / 0x00.
    """
    x = pcm.astype(np.int32)
    magnitude = np.where(x < 0, ~x, x) >> 2
    magnitude = np.minimum(magnitude + _BIAS, _MAX_MAGNITUDE)
    segment = np.zeros_like(magnitude)
    for threshold in (0x40, 0x80, 0x100, 0x200, 0x400, 0x800, 0x1000):
        segment += magnitude >= threshold
    mantissa = (magnitude >> (segment + 1)) & 0x0F
    code = ((7 - segment) << 4) | (0x0F - mantissa)
    signed: npt.NDArray[np.uint8] = np.where(x >= 0, code | 0x80, code).astype(np.uint8)
    return signed


def _mulaw_table() -> npt.NDArray[np.int16]:
    inverted = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (inverted >> 4) & 0x07
    mantissa = inverted & 0x0F
    step = 4 << (exponent + 1)
    magnitude = (0x80 << exponent) + step * mantissa + step // 2 - 4 * _BIAS
    sign = np.where(np.arange(256) < 0x80, -1, 1)
    table: npt.NDArray[np.int16] = (sign * magnitude).astype(np.int16)
    return table


_MULAW_TO_PCM = _mulaw_table()


def mulaw_decode(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.int16]:
    """Expand G.711 mu-law bytes to int16 samples (0x00 -> -32124, 0x80 -> 32124, 0xFF -> 0)."""
    decoded: npt.NDArray[np.int16] = _MULAW_TO_PCM[codes]
    return decoded
