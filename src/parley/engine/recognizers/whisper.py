"""Speech recognition with faster-whisper (CTranslate2, int8 on the CPU).

The model is one PARLEY_STT_MODEL names (tiny.en, base, small, or a directory:
`models.py`); nothing is downloaded. It is
loaded once per process (`load_whisper_model` caches it) and decodes one utterance at a
time through the process's RecognitionQueue, on every core it is given.

Decoding calls CTranslate2 directly rather than faster-whisper's `transcribe`, which pads
every utterance to Whisper's 30 s window: here the encoder sees the utterance plus 2 s of
silence, which is 4 to 5 times faster for a short turn (0.11 s instead of 0.55 s for 3 s of
speech on this 2-core machine) with the same words on our test sentences. The output length
is bounded by the audio's duration, and guards cut what the decoder repeats (less padding
made it repeat the sentence; greedy decoding loops on unclear speech, bench/heldout_speech.py):
a transcript that starts over (`cut_repeat` after a sentence end, `cut_restart` from the first
word heard anew to the end), a last sentence that repeats the words just before it
(`cut_tail_echo`), a phrase of 1 to 4 words said 3 or more times in a row
(`cut_loops`), a phrase of 5 or more said twice in a row (`cut_phrase_repeat`), a group of
thousands repeated inside a number of 10^15 or more (`cut_number_loops`), and a phrase of 3 to
8 words that ends the transcript said twice (`cut_tail_repeat`); each keeps one copy.
Decoding is greedy (beam 1) unless `beam_size` (PARLEY_STT_BEAM_SIZE) asks for a beam
search on finals, and without timestamps. A final asked for its words' times (`words`:
redaction tones them out of the recording) gets them as faster-whisper's `word_timestamps`
does, from the cross-attention of the alignment heads (`find_alignment`, one more decoder
pass over the words on the same encoder output, punctuation merged into its word), mapped
onto the words of the transcript as the guards below left it (`timed_words`). A `prefix`
(the words partial decodes already agreed on, when they are on) is forced onto the decoder;
it saves little, as the encoder is most of a decode (docs/decisions.md).
Finals that wait in the queue together are decoded in one call (`_decode_many`: one
encoder and one decoder pass over the batch), which drains a queue of many conversations'
turns faster than one at a time; partials run alone, and only when the queue is idle.
An utterance whisper itself judges to be no speech (`no_speech_prob` above 0.6) gives no
words, which keeps noise from becoming text.

A multilingual model decodes in the agent's language (Whisper's language token is forced),
and a final decode also asks it which language it hears (one decoder step on the same
encoder output, about 15 ms with base): the transcript reports that language when Whisper
gives it at least `HEARD_LANGUAGE_MIN` probability, else the agent's. An English-only model
reports `en`. Given `languages` (a multilingual agent's, API.md section 18), a final asks
first (the same decoder step, before decoding) which of them it hears, decodes in the
likeliest and reports it (`likeliest_language`).
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np

from parley.engine.base import Transcript, Utterance, Word
from parley.engine.errors import RecognizerUnavailable
from parley.engine.recognizers.models import model_languages, resolve_model
from parley.engine.recognizers.queue import RecognitionQueue, Timed

logger = logging.getLogger(__name__)

_REQUIRED_FILES = ("config.json", "model.bin")
_PADDING_SECONDS = 2.0
_NO_SPEECH = 0.6
_TOKENS_PER_SECOND = 8  # generous: speech runs at about 4 tokens a second
HEARD_LANGUAGE_MIN = 0.5
_LOOP_REPEATS = 3  # a phrase said this many times in a row is a loop (cut_loops)
_models: dict[tuple[str, int], Any] = {}
_warm: set[int] = set()  # id() of the models that decoded once
_models_lock = threading.Lock()
_PREPEND = "\"'“¿([{-"  # faster-whisper's defaults: punctuation joined to the next word
_APPEND = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001"  # ... and to the one before
_Decoded = tuple[str, str, tuple[Word, ...]]
"""One utterance's words, the language heard, and the words' times when asked."""


def check_model_dir(spec: str | Path) -> None:
    """Raise RecognizerUnavailable unless `spec` (a model name or a directory, as
    PARLEY_STT_MODEL) names an installed CTranslate2 Whisper model."""
    path = resolve_model(spec)
    if not path.is_dir():
        raise RecognizerUnavailable(f"The speech model directory {path} does not exist.")
    missing = [name for name in _REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise RecognizerUnavailable(
            f"{path} is not a CTranslate2 Whisper model: {', '.join(missing)} missing."
        )
    if not any(
        (path / name).is_file() for name in ("tokenizer.json", "vocabulary.txt", "vocabulary.json")
    ):
        raise RecognizerUnavailable(f"{path} is not a Whisper model: it has no tokenizer.")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecognizerUnavailable(f"{path}/config.json is not valid JSON.") from exc
    if not isinstance(config, dict) or "suppress_ids" not in config:
        raise RecognizerUnavailable(f"{path} is not a Whisper model (config.json).")


def load_whisper_model(path: Path, *, threads: int) -> Any:
    """Load a model once per process (later calls return the same object)."""
    check_model_dir(path)
    key = (str(path.resolve()), threads)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            try:
                model = WhisperModel(
                    str(path), device="cpu", compute_type="int8", cpu_threads=threads
                )
            except (RuntimeError, ValueError, OSError) as exc:
                raise RecognizerUnavailable(f"The speech model in {path} failed to load.") from exc
            _models[key] = model
            logger.info("loaded speech model %s", path)
        return model


class WhisperRecognizer:
    """faster-whisper behind the process's recognition queue (see the module doc)."""

    sample_rate = 16_000
    incremental = True

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        threads: int = 2,
        beam_size: int = 1,
        max_pending: int = 32,
    ) -> None:
        if not 1 <= beam_size <= 10:
            raise ValueError("beam_size must be 1 to 10")
        self._path = resolve_model(model)
        check_model_dir(self._path)
        self._languages = model_languages(self._path)
        self._threads = threads
        self._beam_size = beam_size
        self._model: Any = None
        self._queue = RecognitionQueue(max_pending=max_pending)

    @property
    def loaded(self) -> bool:
        """True once warm_up (or the first decode) has loaded the model."""
        return self._model is not None

    @property
    def model_dir(self) -> Path:
        """Where the model was loaded from."""
        return self._path

    @property
    def languages(self) -> frozenset[str]:
        """The primary language tags the model transcribes (`en` alone for a `.en` model)."""
        return self._languages

    async def warm_up(self) -> None:
        """Load the model and, once per process, decode a second of silence (the first decode
        of a model is slower)."""
        self._model = await anyio.to_thread.run_sync(
            lambda: load_whisper_model(self._path, threads=self._threads)
        )
        if id(self._model) in _warm:
            return
        silence = np.zeros(self.sample_rate, dtype=np.float32)

        def decode_silence() -> _Decoded:
            return self._decode_many([_Request(silence, "en", "", "", final=False)])[0]

        await self._queue.run(decode_silence)
        _warm.add(id(self._model))

    async def transcribe(
        self,
        utterance: Utterance,
        *,
        language: str,
        prefix: str = "",
        partial: bool = False,
        prompt: str = "",
        words: bool = False,
        languages: Sequence[str] = (),
    ) -> Transcript | None:
        """Decode one utterance at 16 kHz; None when a partial was skipped (queue busy).

        `prompt` (the agent's keywords) is given to Whisper as its initial prompt, the text
        it takes as what came before, which makes those spellings likelier. `words` (a final
        only) times the words too (`Transcript.words`). `languages` (a final only): decode
        in the one of them Whisper finds likeliest, and report it.
        """
        if self._model is None:
            await self.warm_up()
        request = _Request(
            utterance.samples,
            language,
            prefix,
            prompt,
            final=not partial,
            words=words,
            candidates=tuple(languages) if not partial else (),
        )
        timed: Timed[_Decoded] | None
        if partial:
            timed = await self._queue.run(lambda: self._decode_many([request])[0], partial=True)
            if timed is None:
                return None
        else:  # finals that wait together are decoded together (`batch_key`)
            timed = await self._queue.run_batched(
                self._decode_many, request, key=batch_key(request.prompt)
            )
        text, heard, timings = timed.value
        return Transcript(
            text,
            heard,
            queue_seconds=timed.queue_seconds,
            compute_seconds=timed.compute_seconds,
            words=timings,
        )

    async def aclose(self) -> None:
        """Stop the queue's worker thread (the model stays cached for the process)."""
        self._queue.close()

    def _decode_many(self, requests: list[_Request]) -> list[_Decoded]:
        """Decode utterances in one call of the encoder and one of the decoder: each gets its
        words and the language heard (and, asked for, their times). Each utterance is padded
        with silence to the longest one's length plus the usual padding; all must have
        prompts of one length (CTranslate2 wants the start token at one position), which
        `batch_key` groups."""
        import ctranslate2
        from faster_whisper.tokenizer import Tokenizer

        model = self._model
        multilingual = bool(model.model.is_multilingual)
        longest = max(r.audio.size for r in requests)
        pad = int(_PADDING_SECONDS * 16_000)
        features = np.stack(
            [
                model.feature_extractor(r.audio, padding=pad + longest - r.audio.size)
                for r in requests
            ]
        )
        frames = min(features.shape[2], 3000)
        encoded = model.model.encode(
            ctranslate2.StorageView.from_array(
                np.ascontiguousarray(features[:, :, :frames], dtype=np.float32)
            ),
            to_cpu=False,
        )
        detected = (
            model.model.detect_language(encoded)
            if multilingual and any(r.final for r in requests)
            else None
        )
        if detected is not None:  # a multilingual agent's turn: decoded in the likeliest
            requests = [
                replace(r, language=likeliest_language(detected[index], r.candidates))
                if r.candidates
                else r
                for index, r in enumerate(requests)
            ]
        tokenizers = [
            Tokenizer(
                model.hf_tokenizer,
                multilingual,
                task="transcribe",
                language=r.language if multilingual else None,
            )
            for r in requests
        ]
        prompts = [
            model.get_prompt(
                tokenizer,
                _prompt_tokens(tokenizer, r.prompt),
                without_timestamps=True,
                prefix=r.prefix or None,
            )
            for tokenizer, r in zip(tokenizers, requests, strict=True)
        ]
        # The output is bounded by each utterance's duration: the decoder runs to the
        # longest bound in the batch, and each transcript is cut to its own.
        budgets = [8 + int(r.audio.size / self.sample_rate * _TOKENS_PER_SECOND) for r in requests]
        results = model.model.generate(
            encoded,
            prompts,
            # Finals and partials never share a batch: partials run alone (`transcribe`).
            beam_size=self._beam_size if requests[0].final else 1,
            max_length=min(max(len(t) + b for t, b in zip(prompts, budgets, strict=True)), 448),
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=[-1],
        )
        out: list[_Decoded] = []
        for index, (request, tokenizer, result) in enumerate(
            zip(requests, tokenizers, results, strict=True)
        ):
            if result.no_speech_prob > _NO_SPEECH:
                out.append(("", request.language, ()))
                continue
            # The result holds the prompt's text tokens too (the forced prefix), not its
            # specials.
            forced = len(tokenizer.encode(" " + request.prefix.strip())) if request.prefix else 0
            words = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
            words = words[: forced + budgets[index]]
            heard = request.language if multilingual else "en"
            if detected is not None and request.final and not request.candidates:
                heard = heard_language(detected[index], request.language)
            text = tokenizer.decode(words).strip()
            text = cut_decoder_repeats(text)
            timings: tuple[Word, ...] = ()
            if request.words and request.final and text:
                aligned = self._align(encoded, index, len(requests), tokenizer, words, request)
                timings = timed_words(text, aligned)
            out.append((text, heard, timings))
        return out

    def _align(
        self,
        encoded: Any,
        index: int,
        batch: int,
        tokenizer: Any,
        tokens: list[int],
        request: _Request,
    ) -> list[Word]:
        """The times of the decoded `tokens`' words (faster-whisper's `word_timestamps`),
        in seconds of the utterance's audio; none if the alignment fails (the listener then
        times the whole utterance)."""
        import ctranslate2
        from faster_whisper.transcribe import merge_punctuations

        model = self._model
        if batch > 1:  # this utterance's encoder output alone
            one = np.ascontiguousarray(np.asarray(encoded)[index : index + 1])
            encoded = ctranslate2.StorageView.from_array(one)
        frames = request.audio.size // model.feature_extractor.hop_length
        try:
            (alignment,) = model.find_alignment(tokenizer, [tokens], encoded, frames)
        except (RuntimeError, ValueError, IndexError):
            logger.warning("the words of an utterance could not be timed", exc_info=True)
            return []
        merge_punctuations(alignment, _PREPEND, _APPEND)
        return [
            Word(str(timing["word"]).strip(), float(timing["start"]), float(timing["end"]))
            for timing in alignment
            if str(timing["word"]).strip()
        ]


@dataclass(frozen=True)
class _Request:
    """One utterance to decode (`WhisperRecognizer._decode_many`)."""

    audio: Any
    language: str
    prefix: str
    prompt: str
    final: bool  # a turn's final decode: asks the language, may use beams
    words: bool = False  # a final whose words are timed too
    candidates: tuple[str, ...] = ()  # decode in the likeliest of these (a final only)


def timed_words(text: str, aligned: Sequence[Word]) -> tuple[Word, ...]:
    """The words of `text` (split at spaces), each with the time of the `aligned` word it
    is; compared as the repeat guards compare words, since those guards may have cut or
    changed words after the decoder. A word of `text` that matches none takes the time of
    the aligned words it replaced, else the time between its neighbours. None at all:
    nothing was aligned."""
    said = text.split()
    if not aligned or not said:
        return ()
    matcher = difflib.SequenceMatcher(
        a=_word_keys(said), b=_word_keys([word.text for word in aligned]), autojunk=False
    )
    times: list[tuple[float, float] | None] = [None] * len(said)
    for kind, first, last, other_first, other_last in matcher.get_opcodes():
        if kind == "equal":
            for offset in range(last - first):
                match = aligned[other_first + offset]
                times[first + offset] = (match.start, match.end)
        elif kind == "replace":
            span = (aligned[other_first].start, aligned[other_last - 1].end)
            for at in range(first, last):
                times[at] = span
    timed: list[Word] = []
    for at, word in enumerate(said):
        time = times[at]
        if time is None:  # between the words around it
            before = timed[-1].end if timed else aligned[0].start
            after = next((t[0] for t in times[at + 1 :] if t is not None), aligned[-1].end)
            time = (before, max(before, after))
        timed.append(Word(word, time[0], time[1]))
    return tuple(timed)


def batch_key(prompt: str) -> str:
    """Finals with the same key can be decoded in one call: the same keywords give the same
    number of prompt tokens before the start token."""
    return prompt.strip()


def _prompt_tokens(tokenizer: Any, prompt: str) -> list[int]:
    """Whisper's previous-text tokens for the agent's keywords (none without keywords)."""
    return list(tokenizer.encode(" " + prompt.strip())) if prompt.strip() else []


def heard_language(ranked: list[tuple[str, float]], expected: str) -> str:
    """Return the language Whisper hears (its ranked `detect_language` answer for one
    utterance) if it is sure enough, else `expected`."""
    token, probability = ranked[0]
    heard = str(token).removeprefix("<|").removesuffix("|>")
    return heard if probability >= HEARD_LANGUAGE_MIN else expected


def likeliest_language(ranked: list[tuple[str, float]], candidates: Sequence[str]) -> str:
    """Return the one of `candidates` Whisper finds likeliest in its ranked
    `detect_language` answer (the first candidate when it ranks none of them)."""
    scores = {str(token).removeprefix("<|").removesuffix("|>"): p for token, p in ranked}
    return max(candidates, key=lambda language: scores.get(language, -1.0))


def cut_decoder_repeats(text: str) -> str:
    """A decoded transcript with the decoder's repeats cut (every guard below, in order)."""
    text = cut_tail_echo(cut_restart(cut_repeat(text)))
    return cut_tail_repeat(cut_phrase_repeat(cut_loops(cut_number_loops(text))))


def cut_repeat(text: str) -> str:
    """Cut a transcript where it starts over (whisper's loop on short audio).

    "Is there a pharmacy? Is there a" -> "Is there a pharmacy?": a sentence end followed by
    the transcript's first three words (or all of them, if fewer) again.
    """
    words = text.split()
    head = [w.lower().strip(".,!?") for w in words[:3]]
    if len(words) < 2 * len(head) or not head:
        return text
    for index in range(len(head), len(words) - len(head) + 1):
        if not words[index - 1].endswith((".", "!", "?")):
            continue
        if [w.lower().strip(".,!?") for w in words[index : index + len(head)]] == head:
            return " ".join(words[:index])
    return text


def cut_restart(text: str) -> str:
    """Cut a transcript where it starts over from its first word, once or more, to its end.

    "We are arriving on the 21st We are arriving on the" -> "We are arriving on the 21st";
    "Could you confirm it? Good you confirm it? Good you" -> "Could you confirm it?": the
    decoder repeating the utterance on the padding after it (seen with an initial prompt,
    bench/heldout_speech.py), with no sentence end before it or with its first word heard
    anew, which `cut_repeat` needs. The repeat must run to the end, its first word may
    differ and its last stop short, and at least 3 words after the first must match: "I
    said no, I said no, and left" and "Thank you, thank you very much" stay.
    """
    words = text.split()
    keys = _word_keys(words)
    last = len(keys) - 1
    for start in range(_RESTART_MIN_WORDS, len(keys) - _RESTART_MIN_MATCH):
        again = range(start, len(keys))
        if all(
            _repeats(keys, i, i % start, first=i % start == 0, last=i == last) for i in again
        ) and (sum(1 for i in again if i % start) >= _RESTART_MIN_MATCH):
            return " ".join(words[:start])
    return text


def cut_phrase_repeat(text: str) -> str:
    """Keep one of a phrase of 5 or more words said twice in a row, anywhere.

    "I'm from the 9th of November, I'm from the 9th of November, I'm the 8th" -> "I'm from
    the 9th of November, I'm the 8th": the decoder looping on unclear speech mid-sentence,
    which neither `cut_loops` (1 to 4 words, 3 times) nor `cut_restart` (from the start to
    the end) sees. Words compare without case or punctuation. A caller who says five words
    twice loses nothing by hearing them once.
    """
    words = text.split()
    keys = _word_keys(words)
    size = len(keys) // 2
    while size >= _PHRASE_MIN_WORDS:
        for index in range(len(keys) - 2 * size + 1):
            if keys[index] != keys[index + size]:  # most places: no slice made
                continue
            phrase = keys[index : index + size]
            if all(phrase) and keys[index + size : index + 2 * size] == phrase:
                del words[index + size : index + 2 * size], keys[index + size : index + 2 * size]
                break
        else:
            size -= 1
    return " ".join(words)


def cut_tail_echo(text: str) -> str:
    """Cut a sentence of 5 or more words that ends the transcript and repeats a phrase that
    ended just before it (at most 2 words before).

    "the parcel weighs about eight kilos and a 60 centimeters long. About eight kilos and a 60
    centimeters" -> "the parcel weighs about eight kilos and a 60 centimeters long."; "Hello,
    I'd like a window seat, please. We'd like a window seat, please." -> "Hello, I'd like a
    window seat, please.": the decoder reading the end of the utterance
    again on the padding after it, from a word in its middle, which `cut_restart` (from the
    first word) and `cut_phrase_repeat` (twice in a row) do not see. As in `cut_restart`,
    the repeat's first word may differ and its last stop short. A repeat that does not start
    a sentence stays ("I said no, I said no, and left"; "I need a table for two, I need a
    table for" is `cut_restart`'s).
    """
    words = text.split()
    keys = _word_keys(words)
    count = len(keys)
    for size in range(count // 2, _PHRASE_MIN_WORDS - 1, -1):
        tail = count - size
        if not words[tail - 1].endswith((".", "!", "?")):
            continue  # the repeat starts a sentence
        for gap in range(min(_ECHO_MAX_GAP, tail - size) + 1):
            start = tail - gap - size
            if all(
                _repeats(keys, tail + i, start + i, first=i == 0, last=i == size - 1)
                for i in range(size)
            ) and all(keys[tail:]):
                return " ".join(words[:tail])
    return text


_ECHO_MAX_GAP = 2
_PHRASE_MIN_WORDS = 5
_RESTART_MIN_WORDS = 4  # a restart repeats an utterance of at least this many words
_RESTART_MIN_MATCH = 3  # ... and at least this many of its words after the first


def cut_tail_repeat(text: str) -> str:
    """Keep one of a phrase of 3 to 8 words that ends the transcript said twice in a row.

    "ich möchte mit einem Art Station mit einem Art Station." -> "ich möchte mit einem Art
    Station.": the decoder starting over on the padding after the speech (seen with `base`
    on a CPU without AVX-512, whose int8 kernels decode slightly differently). Words compare
    without case or punctuation; the final punctuation is kept. Shorter phrases ("very,
    very") and repeats followed by other words are speech, and stay.
    """
    words = text.split()
    keys = _word_keys(words)
    for size in range(min(8, len(words) // 2), 2, -1):
        if keys[-size:] == keys[-2 * size : -size] and all(keys[-size:]):
            kept = words[:-size]
            ending = words[-1][len(words[-1].rstrip(".,!?;:")) :]
            if not kept[-1].endswith((".", "!", "?")):
                kept[-1] = kept[-1].rstrip(",;:") + ending
            return " ".join(kept)
    return text


_PUNCTUATION_AROUND = re.compile(r"^[^\w$]+|[^\w%]+$")


def _repeats(keys: list[str], at: int, of: int, *, first: bool, last: bool) -> bool:
    """Whether word `at` of a copy repeats word `of` (keys from `_word_keys`): the same, or
    the copy's `first` word heard anew when the next one repeats, or the transcript's `last`
    word stopped short (the output bound cuts it: "21" for "21st")."""
    return (
        keys[at] == keys[of]
        or (first and keys[at + 1 : at + 2] == keys[of + 1 : of + 2])
        or (last and bool(keys[at]) and keys[of].startswith(keys[at]))
    )


def _word_keys(words: list[str]) -> list[str]:
    """The words as the repeat guards compare them: lower case, no punctuation around."""
    return [_PUNCTUATION_AROUND.sub("", word.lower()) for word in words]


# A written number of more than 5 groups of thousands (10^15 and up): no caller says one, the
# decoder loops into them ("9,000,000,000,000,000,000" for "nineteen eighty-seven").
_HUGE_NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3}){5,}\b")


def cut_number_loops(text: str) -> str:
    """Keep one of a group of thousands repeated 3 or more times in a row inside a written
    number of 10^15 or more (a decoder loop inside one word, which `cut_loops` cannot see).

    "9,000,000,000,000,000,000" -> "9,000"; "1,234,000,000,000,000,000" -> "1,234,000";
    "$1,000,000,000" (a billion, three groups) stays.
    """

    def cut(match: re.Match[str]) -> str:
        groups = match.group().split(",")
        kept = groups[:1]
        index = 1
        while index < len(groups):
            count = 1
            while index + count < len(groups) and groups[index + count] == groups[index]:
                count += 1
            kept += groups[index : index + (1 if count >= _LOOP_REPEATS else count)]
            index += count
        return ",".join(kept)

    return _HUGE_NUMBER.sub(cut, text)


def cut_loops(text: str) -> str:
    """Keep one of a phrase of 1 to 4 words said 3 or more times in a row (a decoder loop).

    "$1,000, $1,000, $1,000, $1,000," -> "$1,000,"; "I'm I'm I'm 0142" -> "I'm 0142";
    "I-I-I-I-Nero" -> "I-Nero" (the parts of a hyphenated word count as words). Words compare
    without case or trailing punctuation; what follows the loop is kept.
    """
    pieces = [
        (part, index == 0)  # (text, whether a space comes before it)
        for word in text.split()
        for index, part in enumerate(re.findall(r"[^-]+-*|-+", word))
    ]
    keys = [part.lower().rstrip(".,!?;:-") for part, _ in pieces]
    kept: list[tuple[str, bool]] = []
    index = 0
    while index < len(pieces):
        for size in range(1, 5):
            phrase = keys[index : index + size]
            count = 1
            while keys[index + count * size : index + (count + 1) * size] == phrase:
                count += 1
            if len(phrase) == size and count >= _LOOP_REPEATS:
                kept += pieces[index : index + size]
                index += count * size
                break
        else:
            kept.append(pieces[index])
            index += 1
    return "".join((" " if spaced and n else "") + part for n, (part, spaced) in enumerate(kept))
