"""Speech synthesizers: hibari-tts (the product voice) and espeak-ng (the fallback).

HibariSynthesizer runs the hibari-tts ONNX voices, 24 kHz, about 100x real time on one core.
Each voice is loaded once per process, on first use or in warm_up(), under a lock; synthesis runs
in a worker thread, one sentence at a time per voice (a per-voice lock), so the event loop never
waits for it. Only voices present on disk are offered: "heart" ships in the wheel; the others
count only if already in hibari's cache directory, since nothing is downloaded at run time.

EspeakSynthesizer runs the espeak-ng program (Debian package espeak-ng) as a subprocess, with a
timeout and an output cap; it sounds robotic and serves only where hibari cannot be installed.
load_synthesizer() picks the first of the two that works.
"""

from __future__ import annotations

import logging
import shutil
import struct
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import numpy as np

from parley.engine.audio import Samples, pcm16_to_float, resample
from parley.engine.base import Synthesizer
from parley.engine.errors import SynthesizerUnavailable

logger = logging.getLogger(__name__)

_DEFAULT_ALIASES = frozenset({"", "default"})
GENERIC_VOICES = {
    "us_female": "heart",
    "us_male": "fenrir",
    "gb_female": "emma",
    "gb_male": "fable",
}
"""Accent-and-gender voice IDs (the API's default is us_female) and the hibari voice of each."""


def _voice_key(voice_id: str) -> str:
    return voice_id.strip().lower()


@dataclass
class _LoadedVoice:
    tts: Any
    lock: threading.Lock


class HibariSynthesizer:
    """hibari-tts voices, by hibari name ("heart"), Kokoro name ("af_heart") or GENERIC_VOICES.

    The default is "heart" (American English, female). `seed` fixes hibari's noise component,
    so a sentence always sounds the same; None varies it.
    """

    sample_rate = 24_000
    default_voice = "heart"

    def __init__(self, *, threads: int = 1, seed: int | None = 0) -> None:
        try:
            from hibari import voices as registry
        except ImportError as exc:
            raise SynthesizerUnavailable("hibari-tts is not installed.") from exc
        self._threads = threads
        self._seed = seed
        self._paths: dict[str, str] = {}
        self._aliases: dict[str, str] = {}
        for name, info in registry.VOICES.items():
            try:
                self._paths[name] = registry.voice_path(name, download_missing=False)
            except (FileNotFoundError, ValueError):
                continue
            self._aliases[name.lower()] = name
            self._aliases[str(info.get("kokoro", name)).lower()] = name
        for generic, name in GENERIC_VOICES.items():
            if name in self._paths:
                self._aliases[generic] = name
        if self.default_voice not in self._paths:
            raise SynthesizerUnavailable("hibari-tts has no default voice on disk.")
        self._lock = threading.Lock()
        self._loaded: dict[str, _LoadedVoice] = {}

    def voices(self) -> tuple[str, ...]:
        """Return the hibari voice names available offline."""
        return tuple(sorted(self._paths))

    def resolve_voice(self, voice_id: str) -> str | None:
        """Map a voice_id to a voice on disk; "" and "default" mean the default voice."""
        key = _voice_key(voice_id)
        return self.default_voice if key in _DEFAULT_ALIASES else self._aliases.get(key)

    async def warm_up(self) -> None:
        """Load the default voice in a worker thread."""
        await anyio.to_thread.run_sync(self._voice, self.default_voice)

    async def synthesize(self, text: str, *, voice: str) -> Samples:
        """Synthesize one sentence in a worker thread; `voice` must come from resolve_voice."""
        return await anyio.to_thread.run_sync(self._synthesize, text, voice)

    def _synthesize(self, text: str, voice: str) -> Samples:
        loaded = self._voice(voice)
        with loaded.lock:
            audio = loaded.tts(text, seed=self._seed)
        return np.asarray(audio, dtype=np.float32)

    def _voice(self, name: str) -> _LoadedVoice:
        with self._lock:
            loaded = self._loaded.get(name)
            if loaded is None:
                from hibari import Hibari

                tts = Hibari(voice=name, model=self._paths[name], threads=self._threads)
                tts.phonemize("Ready.")  # loads the text front end now, not on the first reply
                loaded = self._loaded[name] = _LoadedVoice(tts, threading.Lock())
                logger.info("loaded hibari voice %s", name)
            return loaded


class EspeakSynthesizer:
    """espeak-ng voices "en-us" (default) and "en-gb"; the hibari and generic IDs map by accent."""

    sample_rate = 22_050
    default_voice = "en-us"
    _ALIASES: ClassVar[dict[str, str]] = {
        "en-us": "en-us",
        "en-gb": "en-gb",
        **{generic: "en-us" if generic.startswith("us") else "en-gb" for generic in GENERIC_VOICES},
        **dict.fromkeys(("heart", "af_heart", "fenrir", "am_fenrir", "kore", "af_kore"), "en-us"),
        **dict.fromkeys(("emma", "bf_emma", "fable", "bm_fable"), "en-gb"),
    }

    def __init__(
        self,
        executable: str | None = None,
        *,
        timeout_s: float = 10.0,
        max_output_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        path = executable or shutil.which("espeak-ng")
        if path is None:
            raise SynthesizerUnavailable("espeak-ng is not installed.")
        self._executable = path
        self._timeout_s = timeout_s
        self._max_output_bytes = max_output_bytes

    def voices(self) -> tuple[str, ...]:
        """Return the espeak-ng voices offered."""
        return ("en-gb", "en-us")

    def resolve_voice(self, voice_id: str) -> str | None:
        """Map a voice_id to "en-us" or "en-gb"; "" and "default" mean "en-us"."""
        key = _voice_key(voice_id)
        return self.default_voice if key in _DEFAULT_ALIASES else self._ALIASES.get(key)

    async def warm_up(self) -> None:
        """Nothing to load: each sentence starts its own process."""

    async def synthesize(self, text: str, *, voice: str) -> Samples:
        """Run espeak-ng on one sentence (text on stdin, WAV on stdout) with a timeout."""
        command = [self._executable, "--stdin", "--stdout", "-v", voice]
        with anyio.fail_after(self._timeout_s):
            result = await anyio.run_process(command, input=text.encode(), check=True)
        if len(result.stdout) > self._max_output_bytes:
            raise ValueError(f"espeak-ng produced more than {self._max_output_bytes} bytes")
        rate, samples = parse_wav(result.stdout)
        return resample(samples, rate, self.sample_rate)


def parse_wav(data: bytes) -> tuple[int, Samples]:
    """Return (sample rate, samples) of a mono 16-bit PCM WAV.

    Tolerates the placeholder sizes espeak-ng writes when streaming to stdout: the data chunk
    runs to the end of the input.
    """
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE stream")
    rate: int | None = None
    position = 12
    while position + 8 <= len(data):
        chunk_id = data[position : position + 4]
        (size,) = struct.unpack_from("<I", data, position + 4)
        body = position + 8
        if chunk_id == b"fmt ":
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if (tag, channels, bits) != (1, 1, 16):
                raise ValueError("only mono 16-bit PCM WAV is supported")
        elif chunk_id == b"data":
            if rate is None:
                raise ValueError("WAV data before its fmt chunk")
            payload = data[body : min(body + size, len(data))]
            payload = payload[: len(payload) - len(payload) % 2]
            return rate, pcm16_to_float(np.frombuffer(payload, dtype="<i2"))
        position = body + size + (size & 1)
    raise ValueError("WAV without a data chunk")


def load_synthesizer() -> Synthesizer:
    """Return hibari-tts if it is installed, else espeak-ng; raise SynthesizerUnavailable."""
    try:
        return HibariSynthesizer()
    except SynthesizerUnavailable as hibari_missing:
        logger.warning("%s Falling back to espeak-ng.", hibari_missing.message)
    try:
        return EspeakSynthesizer()
    except SynthesizerUnavailable:
        raise SynthesizerUnavailable(
            "No speech synthesizer: install hibari-tts (or the espeak-ng program)."
        ) from None
