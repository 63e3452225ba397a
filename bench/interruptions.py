"""Interruptions that are meant (issue #42, API.md section 18): speech over the agent's reply.

Run: `.venv/bin/python bench/interruptions.py [--backchannels 20] [--interruptions 20]
[--noises 20] [--baseline 10] [--voices hibari,joe]`.

In this process, the default engine (Silero VAD, faster-whisper tiny.en, the service's
pacing: 0.5 s ahead of playback) speaks tests/overlaps.py's reply with a tone voice (its
audio is not what is judged), and once it is on air a sound is fed over it in real time,
20 ms chunks (tests/overlaps.py `over_agent`). Per voice (hibari, the tests' voice; `joe`,
the Piper voice the tests never used, bench/heldout_speech.py, else espeak-ng's en-us):

- backchannels ("Uh-huh.", "Yeah.", "Right.", "Okay.", "Sure.", "I see.", "Got it.",
  "Yep.", cycled): an interruption is an `InterruptedResponse`; goal 0 in all;
- real interruptions (tests/speech.py's sentences, `min_words_to_interrupt` 1): the time
  from the sound's first loud sample being fed to the agent's audio stopping (the engine's
  AssistantPaused, or its InterruptedResponse when it does not pause); goal <= 300 ms in
  >= 95 %, and each one interrupted in the end;
- noise bursts (0.25 s of speech played backwards under a window, tests/overlaps.py:
  the VAD takes it for a voice, it holds no word), one voice only: resumed (the whole reply
  spoken, no interruption) in >= 90 %.

The baseline is the engine as it was before (the feature off: a recognizer that reports it
cannot decode speech as it comes, so speech interrupts at its onset), `--baseline` trials of
each kind per voice, in the same run. The machine's load is printed: the figures are
timing-sensitive.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import overlaps, speech
from tests.engine.recorder import Recorder

from parley.engine import (
    AudioFormat,
    DefaultEngineFactory,
    Samples,
    SessionConfig,
    Transcript,
    Utterance,
)
from parley.engine.base import AgentTuning
from parley.engine.recognizers import WhisperRecognizer

FMT = AudioFormat.PCM_16000
STOP_GOAL_MS = 300


class ToneVoice:
    """The agent's voice here: a quiet tone, 60 ms a word (what the user hears is not judged)."""

    sample_rate = 16_000
    default_voice = "tone"

    def voices(self) -> tuple[str, ...]:
        return ("tone",)

    def resolve_voice(self, voice_id: str) -> str | None:  # noqa: ARG002 - one voice
        return "tone"

    async def warm_up(self) -> None:
        return None

    async def synthesize(
        self,
        text: str,
        *,
        voice: str,  # noqa: ARG002 - one voice
        speed: float = 1.0,
    ) -> Samples:
        seconds = max(0.06 * len(text.split()), 0.2) / speed
        t = np.arange(round(seconds * self.sample_rate)) / self.sample_rate
        return (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


class NotIncremental:
    """The baseline: Whisper, but reporting that it cannot decode speech as it comes, so
    the engine interrupts at the onset as it did before the feature."""

    incremental = False

    def __init__(self, inner: WhisperRecognizer) -> None:
        self._inner = inner
        self.sample_rate = inner.sample_rate

    async def warm_up(self) -> None:
        await self._inner.warm_up()

    async def transcribe(self, utterance: Utterance, **options: Any) -> Transcript | None:
        return await self._inner.transcribe(utterance, **options)

    async def aclose(self) -> None:
        return None


def voice_renderer(name: str) -> Callable[[str], tuple[Samples, int]]:
    """`text` -> (samples, rate) in voice `name`."""
    if name == "hibari":
        return lambda text: (speech.spoken(text), speech.RATE)
    from bench.heldout_speech import _PIPER_DIR, PiperVoice, espeak_spoken

    if name == "joe" and (_PIPER_DIR / "model.onnx").is_file():
        piper = PiperVoice(_PIPER_DIR)
        return piper.speak
    print(f"  ({name}: the Piper voice is not installed; espeak-ng en-us instead)")
    return lambda text: espeak_spoken(text, "en-us")


async def trial(
    factory: DefaultEngineFactory, sound: Samples, rate: int, min_words: int = 1
) -> overlaps.Overlap:
    config = SessionConfig(
        agent_name="bench",
        system_prompt="",
        welcome_message=None,
        voice_id="tone",
        input_format=FMT,
        output_format=FMT,
        tuning=AgentTuning(min_words_to_interrupt=min_words),
    )
    recorder = Recorder()
    async with factory.create(config) as engine, anyio.create_task_group() as group:
        group.start_soon(recorder.consume, engine)
        found = await overlaps.over_agent(engine, recorder, sound, fmt=FMT, rate=rate)
        await engine.close()
    return found


def share(values: list[bool]) -> str:
    return f"{sum(values)}/{len(values)} ({100 * sum(values) / max(len(values), 1):.0f} %)"


async def run_kind(
    factory: DefaultEngineFactory, sounds: list[tuple[Samples, int]]
) -> list[overlaps.Overlap]:
    results = []
    for sound, rate in sounds:
        results.append(await trial(factory, sound, rate))
    return results


def report(label: str, kind: str, results: list[overlaps.Overlap]) -> dict[str, Any]:
    interrupted = [r.interrupted is not None for r in results]
    stops = [r.stop_ms for r in results if r.stop_ms is not None]
    resumed = [r.interrupted is None and r.finished for r in results]
    paused = [r.paused_at is not None for r in results]
    line = f"  {label:9} {kind:13} n={len(results):3}  interrupted {share(interrupted)}"
    if kind == "interruption":
        within = [s <= STOP_GOAL_MS for s in stops] + [False] * (len(results) - len(stops))
        line += (
            f"  stopped <= {STOP_GOAL_MS} ms {share(within)}"
            f"  p50 {statistics.median(stops):.0f} ms  max {max(stops):.0f} ms"
            if stops
            else "  never stopped"
        )
    else:
        line += f"  paused {share(paused)}  resumed whole {share(resumed)}"
    print(line, flush=True)
    if kind != "interruption":
        for result in results:
            if result.interrupted is not None:
                print(f"    interrupted by what was heard: {result.heard}", flush=True)
    return {"interrupted": interrupted, "stops": stops, "resumed": resumed}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backchannels", type=int, default=20, help="per voice")
    parser.add_argument("--interruptions", type=int, default=20, help="per voice")
    parser.add_argument("--noises", type=int, default=20)
    parser.add_argument("--baseline", type=int, default=10, help="trials of each kind per voice")
    parser.add_argument("--voices", default="hibari,joe")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    whisper = WhisperRecognizer()
    feature = DefaultEngineFactory(ToneVoice(), recognizer=whisper)
    baseline = DefaultEngineFactory(ToneVoice(), recognizer=NotIncremental(whisper))
    await feature.warm_up()
    backchannels = list(overlaps.BACKCHANNELS)
    figures: dict[tuple[str, str, str], dict[str, Any]] = {}
    for voice in args.voices.split(","):
        render = voice_renderer(voice)
        print(f"voice {voice}:", flush=True)
        kinds = {
            "backchannel": [
                render(backchannels[i % len(backchannels)]) for i in range(args.backchannels)
            ],
            "interruption": [
                render(speech.SENTENCES[i % len(speech.SENTENCES)])
                for i in range(args.interruptions)
            ],
        }
        if voice == args.voices.split(",")[0]:
            kinds["noise"] = [
                (overlaps.noise_burst(seed=i), speech.RATE) for i in range(args.noises)
            ]
        for kind, sounds in kinds.items():
            for label, factory, chosen in (
                ("feature", feature, sounds),
                ("baseline", baseline, sounds[: args.baseline]),
            ):
                results = await run_kind(factory, chosen)
                figures[(voice, kind, label)] = report(label, kind, results)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print("goals (the feature, all voices):")

    def pooled(kind: str, key: str) -> list[Any]:
        return [
            v
            for (_, k, label), f in figures.items()
            if k == kind and label == "feature"
            for v in f[key]
        ]

    back = pooled("backchannel", "interrupted")
    verdict = "met" if not any(back) else "MISSED"
    print(f"  backchannels: 0 interruptions: {sum(back)} in {len(back)}: {verdict}")
    stops = pooled("interruption", "stops")
    real = pooled("interruption", "interrupted")
    within = sum(s <= STOP_GOAL_MS for s in stops)
    ok = within >= 0.95 * len(real)
    print(
        f"  real interruptions stopped within {STOP_GOAL_MS} ms: {within} of {len(real)}:"
        f" {'met' if ok else 'MISSED'} (interrupted in the end: {sum(real)})"
    )
    resumed = pooled("noise", "resumed")
    ok = sum(resumed) >= 0.9 * max(len(resumed), 1)
    print(f"  noise bursts resumed: {sum(resumed)} of {len(resumed)}: {'met' if ok else 'MISSED'}")
    await feature.aclose()


if __name__ == "__main__":
    asyncio.run(main())
