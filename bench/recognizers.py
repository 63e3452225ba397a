"""What each speech model costs: decode time per utterance, word error rate, load, memory.

Run: `nice -n 5 .venv/bin/python bench/recognizers.py [--models tiny.en,base] [--repeat 2]`.

Each model (a PARLEY_STT_MODEL value: a name or a directory) runs in a process of its own,
so its memory is its own, through `WhisperRecognizer` as the engine uses it (int8, 2
threads, the process's queue). The speech is the 22 hibari sentences of tests/speech.py as
the engine receives them: `pcm_16000` (clean) and `mulaw_8000` (the phone band), 0.2 s of
silence before and 0.3 s after, one final decode each (no prefix; a multilingual model
also asks which language it hears, as a final decode does). Per model it prints:

- the load and warm-up time, and the process's peak resident memory after all decodes;
- the final decode's p50 and p95 time (the whole utterance, `--repeat` passes over the
  sentences, the first pass's decodes included);
- the word error rate, clean and phone band (tests/speech.py's scoring: lower case, no
  punctuation, numbers as written);
- for a multilingual model, the languages it reported for the English sentences (every one
  should be `en`), and the German and Spanish espeak-ng sentences of tests/languages.py
  (errors and the language reported).

With `--words`, what timing the words costs a final decode (redaction's tone, API.md
section 16): each clean sentence decoded `--repeat` times with and without `words=True`,
in turn (so the machine's load falls on both alike), and p50/p95 of each and of the
difference per sentence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import languages, speech

from parley.engine import AudioFormat, Utterance, WhisperRecognizer
from parley.engine.audio import StreamResampler, decode


def received(fmt: AudioFormat, samples: np.ndarray) -> Utterance:
    """24 kHz speech as the engine hears it: wire chunks in `fmt`, streamed to 16 kHz."""
    resampler = StreamResampler(fmt.sample_rate, 16_000)
    chunks = speech.stream(fmt, 0.2, samples, 0.3)
    audio = np.concatenate([resampler.feed(decode(fmt, chunk)) for chunk in chunks])
    return Utterance(audio, 16_000, audio.size / 16_000)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def word_timing_cost(
    recognizer: WhisperRecognizer, utterances: list[Utterance], repeat: int
) -> dict[str, float]:
    """Final decodes with and without word timings, in turn: p50/p95 of each and of the
    extra time per utterance, in seconds."""
    plain: list[float] = []
    timed: list[float] = []
    for _ in range(repeat):
        for utterance in utterances:
            for words, times in ((False, plain), (True, timed)):
                began = time.perf_counter()
                await recognizer.transcribe(utterance, language="en", words=words)
                times.append(time.perf_counter() - began)
    extra = [t - p for p, t in zip(plain, timed, strict=True)]
    return {
        "plain_p50_s": statistics.median(plain),
        "plain_p95_s": percentile(plain, 0.95),
        "timed_p50_s": statistics.median(timed),
        "timed_p95_s": percentile(timed, 0.95),
        "extra_p50_s": statistics.median(extra),
        "extra_p95_s": percentile(extra, 0.95),
    }


async def measure(model: str, repeat: int, timed_words: bool = False) -> dict[str, Any]:
    """Every figure of one model, in this process."""
    recognizer = WhisperRecognizer(model or None, threads=2)
    started = time.perf_counter()
    await recognizer.warm_up()
    figures: dict[str, Any] = {"load_s": time.perf_counter() - started}
    multilingual = recognizer.languages != {"en"}
    clean = {s: received(AudioFormat.PCM_16000, speech.spoken(s)) for s in speech.SENTENCES}
    times: list[float] = []
    reported: list[str] = []
    for band, fmt in (("clean", AudioFormat.PCM_16000), ("phone", AudioFormat.MULAW_8000)):
        errors = words = 0
        for sentence in speech.SENTENCES:
            utterance = (
                clean[sentence] if band == "clean" else received(fmt, speech.spoken(sentence))
            )
            passes = repeat if band == "clean" else 1
            for _ in range(passes):
                began = time.perf_counter()
                heard = await recognizer.transcribe(utterance, language="en")
                took = time.perf_counter() - began
                if band == "clean":
                    times.append(took)
            assert heard is not None
            reported.append(heard.language)
            errors += speech.word_errors(sentence, heard.text)
            words += len(speech.words(sentence))
        figures[f"wer_{band}"] = errors / words
    figures["decode_p50_s"] = statistics.median(times)
    figures["decode_p95_s"] = percentile(times, 0.95)
    figures["speech_s"] = statistics.mean(u.speech_seconds for u in clean.values())
    if timed_words:
        figures["words"] = await word_timing_cost(recognizer, list(clean.values()), repeat)
    if multilingual:
        figures["english_reported"] = sorted(set(reported))
        for voice, sentence in (("de", languages.GERMAN), ("es", languages.SPANISH)):
            utterance = received(AudioFormat.PCM_16000, languages.espeak_spoken(sentence, voice))
            heard = await recognizer.transcribe(utterance, language=voice)
            assert heard is not None
            figures[f"espeak_{voice}"] = {
                "errors": languages.word_errors(sentence, heard.text),
                "words": len(languages.words(sentence)),
                "language": heard.language,
                "text": heard.text,
            }
    await recognizer.aclose()
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return figures


def report(model: str, figures: dict[str, Any]) -> None:
    print(
        f"{model}: load {figures['load_s']:.1f} s, peak RSS {figures['peak_rss_mb']:.0f} MB; "
        f"final decode of {figures['speech_s']:.1f} s speech p50 "
        f"{figures['decode_p50_s'] * 1000:.0f} ms, p95 {figures['decode_p95_s'] * 1000:.0f} ms; "
        f"WER clean {figures['wer_clean']:.1%}, phone band {figures['wer_phone']:.1%}"
    )
    if "words" in figures:
        w = {name: value * 1000 for name, value in figures["words"].items()}
        print(
            f"  word timings: final decode p50 {w['plain_p50_s']:.0f} -> {w['timed_p50_s']:.0f}"
            f" ms, p95 {w['plain_p95_s']:.0f} -> {w['timed_p95_s']:.0f} ms; extra per"
            f" utterance p50 {w['extra_p50_s']:.0f} ms, p95 {w['extra_p95_s']:.0f} ms"
        )
    if "english_reported" in figures:
        print(f"  English sentences reported as: {', '.join(figures['english_reported'])}")
        for voice in ("de", "es"):
            heard = figures[f"espeak_{voice}"]
            print(
                f"  espeak {voice}: {heard['errors']} of {heard['words']} words wrong, "
                f"reported {heard['language']}: {heard['text']!r}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny.en,base")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the clean sentences")
    parser.add_argument("--words", action="store_true", help="also time decodes with words")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child: one model, JSON out
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(asyncio.run(measure(args.one, args.repeat, args.words))))
        return
    for model in args.models.split(","):
        words = ["--words"] if args.words else []
        child = subprocess.run(  # noqa: S603 - this interpreter, this script
            [sys.executable, __file__, "--one", model, "--repeat", str(args.repeat), *words],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            print(f"{model}: failed\n{child.stderr.strip()}")
            continue
        report(model, json.loads(child.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
