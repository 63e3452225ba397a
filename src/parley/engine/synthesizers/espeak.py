"""espeak-ng, the fallback voice where hibari-tts cannot be installed, and the voice of the
languages other than English (API.md section 18: no packaged voice of those is on PyPI).

It runs the espeak-ng program (Debian package espeak-ng) as a subprocess, with a timeout and
an output cap; it sounds robotic. Its voices: "en-us" and "en-gb", and one per language of
`LANGUAGE_VOICES` ("espeak-de" speaks German), each espeak-ng's voice of that language.
"""

from __future__ import annotations

import shutil
import struct
from typing import ClassVar

import anyio
import numpy as np

from parley.engine.audio import Samples, pcm16_to_float, resample
from parley.engine.errors import SynthesizerUnavailable
from parley.engine.synthesizers.hibari import DEFAULT_ALIASES, GENERIC_VOICES, voice_key

WORDS_PER_MINUTE = 175
"""espeak-ng's default pace (its `-s`)."""
LANGUAGE_VOICES = {
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hi": "Hindi",
    "hu": "Hungarian",
    "it": "Italian",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
}
"""The languages besides English it offers a voice of (each one Whisper hears too), by
primary tag: the voice `espeak-<tag>` is espeak-ng's `-v <tag>`."""
LANGUAGE_VOICE_PREFIX = "espeak-"


class EspeakSynthesizer:
    """espeak-ng voices "en-us" (default) and "en-gb", the hibari and generic IDs mapped by
    accent, and one voice of each language of `LANGUAGE_VOICES`."""

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
        sample_rate: int = 22_050,
    ) -> None:
        path = executable or shutil.which("espeak-ng")
        if path is None:
            raise SynthesizerUnavailable("espeak-ng is not installed.")
        self.sample_rate = sample_rate
        self._executable = path
        self._timeout_s = timeout_s
        self._max_output_bytes = max_output_bytes

    def voices(self) -> tuple[str, ...]:
        """Return the espeak-ng voices offered: English, then one per other language."""
        return ("en-gb", "en-us", *self.language_voices())

    @staticmethod
    def language_voices() -> tuple[str, ...]:
        """The voices of the languages other than English ("espeak-de", ...)."""
        return tuple(LANGUAGE_VOICE_PREFIX + tag for tag in LANGUAGE_VOICES)

    def describe(self, voice: str) -> str | None:
        """Its accent or language: "American English (espeak-ng)", "German (espeak-ng)"."""
        accents = {"en-us": "American", "en-gb": "British"}
        if voice in accents:
            return f"{accents[voice]} English (espeak-ng)"
        name = LANGUAGE_VOICES.get(voice.removeprefix(LANGUAGE_VOICE_PREFIX))
        return f"{name} (espeak-ng)" if name else None

    def language_of(self, voice: str) -> str:
        """The primary language tag `voice` speaks ("en" for the English ones)."""
        tag = voice.removeprefix(LANGUAGE_VOICE_PREFIX)
        return tag if tag in LANGUAGE_VOICES else "en"

    def resolve_voice(self, voice_id: str) -> str | None:
        """Map a voice_id to "en-us", "en-gb" or a language's voice; "" and "default" mean
        "en-us"."""
        key = voice_key(voice_id)
        if key in DEFAULT_ALIASES:
            return self.default_voice
        if key.startswith(LANGUAGE_VOICE_PREFIX) and self.language_of(key) != "en":
            return key
        return self._ALIASES.get(key)

    async def warm_up(self) -> None:
        """Nothing to load: each sentence starts its own process."""

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        """Run espeak-ng on one sentence (text on stdin, WAV on stdout) with a timeout; a
        `speed` other than 1.0 sets its words per minute (`-s`) to that share of its 175."""
        spoken = voice.removeprefix(LANGUAGE_VOICE_PREFIX)
        command = [self._executable, "--stdin", "--stdout", "-v", spoken]
        if speed != 1.0:
            command += ["-s", str(round(WORDS_PER_MINUTE * speed))]
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
