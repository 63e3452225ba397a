"""Real-time factor of speech synthesis: how many seconds of speech one second of CPU makes.

Run: `.venv/bin/python bench/engine_tts.py [--rounds R]`.

For each synthesizer that is installed (hibari-tts; espeak-ng when the program is on PATH) it
loads the default voice, then synthesizes a fixed set of sentences sentence by sentence, as the
engine does, and reports: load time, median latency of one short sentence (what the listener
waits for before the first audio chunk), and the real-time factor (audio seconds / wall
seconds; best of R rounds), with and without the resample + encode step to mulaw_8000 and
pcm_44100 that every sentence also goes through.
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio

from parley.engine import (
    AudioFormat,
    EspeakSynthesizer,
    HibariSynthesizer,
    Synthesizer,
    SynthesizerUnavailable,
)
from parley.engine.audio import render

SENTENCES = [
    "Hello, thanks for calling Acme support.",
    "I can help you track an order, change a delivery address, or start a return.",
    "Your parcel left our warehouse on Tuesday and should arrive within three working days.",
    "Is there anything else I can do for you today?",
    "The quick brown fox jumps over the lazy dog while the band plays a slow song.",
]
SHORT = "How can I help you?"


async def measure(synthesizer: Synthesizer, rounds: int) -> dict[str, float]:
    voice = synthesizer.default_voice
    start = time.perf_counter()
    await synthesizer.warm_up()
    load_s = time.perf_counter() - start
    latencies = []
    for _ in range(5):
        start = time.perf_counter()
        await synthesizer.synthesize(SHORT, voice=voice)
        latencies.append(time.perf_counter() - start)
    best: dict[str, float] = {}
    for fmt in (None, AudioFormat.MULAW_8000, AudioFormat.PCM_44100):
        key = "synthesis only" if fmt is None else f"+ {fmt.value}"
        for _ in range(rounds):
            audio_s = 0.0
            start = time.perf_counter()
            for sentence in SENTENCES:
                samples = await synthesizer.synthesize(sentence, voice=voice)
                audio_s += samples.size / synthesizer.sample_rate
                if fmt is not None:
                    render(samples, synthesizer.sample_rate, fmt)
            best[key] = max(best.get(key, 0.0), audio_s / (time.perf_counter() - start))
    return {"load_s": load_s, "short_ms": statistics.median(latencies) * 1e3, **best}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name, build in (("hibari-tts", HibariSynthesizer), ("espeak-ng", EspeakSynthesizer)):
        try:
            synthesizer: Synthesizer = build()
        except SynthesizerUnavailable as exc:
            print(f"{name}: not installed ({exc.message})")
            continue
        figures = await measure(synthesizer, args.rounds)
        print(f"{name} (voice {synthesizer.default_voice}, {synthesizer.sample_rate} Hz)")
        load_s, short_ms = figures.pop("load_s"), figures.pop("short_ms")
        print(f"  load {load_s:.2f} s, short sentence {short_ms:.0f} ms")
        for key, factor in figures.items():
            print(f"  real-time factor, {key}: {factor:.0f}x")


if __name__ == "__main__":
    anyio.run(main)
