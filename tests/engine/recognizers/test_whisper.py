"""faster-whisper on real speech: words in every input format, the queue, a bad model."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests import speech

from parley.engine import AudioFormat, RecognizerUnavailable, Utterance, WhisperRecognizer, Word
from parley.engine.audio import StreamResampler, decode, resample
from parley.engine.errors import RecognizerOverloaded
from parley.engine.recognizers import RecognitionQueue, check_model_dir, default_model_dir
from parley.engine.recognizers.whisper import (
    _Request,
    cut_decoder_repeats,
    cut_loops,
    cut_number_loops,
    cut_phrase_repeat,
    cut_repeat,
    cut_restart,
    cut_tail_echo,
    cut_tail_repeat,
    timed_words,
)
from parley.redaction import join_words, redact, tone_spans

pytestmark = pytest.mark.anyio
PHONE_NUMBER_WORDS = "four one five five five five two six seven one."


def as_received(fmt: AudioFormat, sentence: str) -> Utterance:
    """The sentence as the engine hears it: wire chunks in `fmt`, streamed to 16 kHz."""
    resampler = StreamResampler(fmt.sample_rate, 16_000)
    parts = [
        resampler.feed(decode(fmt, chunk))
        for chunk in speech.stream(fmt, 0.2, speech.spoken(sentence), 0.3)
    ]
    audio = np.concatenate(parts)
    return Utterance(audio, 16_000, audio.size / 16_000)


@pytest.mark.parametrize("fmt", list(AudioFormat), ids=lambda f: f.value)
async def test_whisper_word_error_rate_at_most_5_percent_every_format(fmt: AudioFormat) -> None:
    recognizer = WhisperRecognizer()
    try:
        errors = words = 0
        misheard = []
        for sentence in speech.SENTENCES:
            result = await recognizer.transcribe(as_received(fmt, sentence), language="en")
            assert result is not None
            wrong = speech.word_errors(sentence, result.text)
            errors += wrong
            words += len(speech.words(sentence))
            if wrong:
                misheard.append(result.text)
    finally:
        await recognizer.aclose()
    assert len(speech.SENTENCES) >= 20
    assert errors / words <= 0.05, misheard


async def test_whisper_prefix_forced_then_tail_decoded() -> None:
    recognizer = WhisperRecognizer()
    sentence = speech.SENTENCES[0]
    try:
        result = await recognizer.transcribe(
            as_received(AudioFormat.PCM_16000, sentence),
            language="en",
            prefix="Please book me a table",
        )
    finally:
        await recognizer.aclose()
    assert result is not None
    assert speech.word_errors(sentence, result.text) == 0
    assert result.compute_seconds > 0


async def test_whisper_silence_and_noise_give_no_words() -> None:
    recognizer = WhisperRecognizer()
    noise = np.random.default_rng(3).normal(0, 0.05, 16_000 * 3).astype(np.float32)
    try:
        for audio in (np.zeros(16_000 * 2, dtype=np.float32), noise):
            result = await recognizer.transcribe(Utterance(audio, 16_000, 2.0), language="en")
            assert result is not None
            assert result.text == ""
    finally:
        await recognizer.aclose()


def test_whisper_repeat_cut() -> None:
    assert cut_repeat("Is there a pharmacy? Is there a") == "Is there a pharmacy?"
    assert cut_repeat("I said no. I said it twice.") == "I said no. I said it twice."


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("It was $1,000, $1,000, $1,000, $1,000,", "It was $1,000,"),
        ("My number is I'm I'm I'm I'm 0142 and my email", "My number is I'm 0142 and my email"),
        ("on Saturday 13th Saturday 13th Saturday 13th Saturday", "on Saturday 13th Saturday"),
        ("My phone number is I-I-I-I-Nero142 and", "My phone number is I-Nero142 and"),
        ("No, no. I said no, not now.", "No, no. I said no, not now."),
        ("That's P-A-T-E-L, 555-0142.", "That's P-A-T-E-L, 555-0142."),
        ("Thank you, thank you very much.", "Thank you, thank you very much."),
    ],
    ids=[
        "money",
        "word",
        "phrase-then-tail",
        "hyphenated",
        "two-is-no-loop",
        "hyphens-kept",
        "no-repeat",
    ],
)
def test_whisper_loop_cut(text: str, kept: str) -> None:
    assert cut_loops(text) == kept


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "Guten Tag, ich möchte mit einem Art Station mit einem Art Station.",
            "Guten Tag, ich möchte mit einem Art Station.",
        ),
        ("I need a table for four, a table for four", "I need a table for four"),
        ("Very, very good.", "Very, very good."),
        ("I said no, I said no, and left.", "I said no, I said no, and left."),
        ("a table for a table for", "a table for"),
        ("Thank you, thank you very much.", "Thank you, thank you very much."),
    ],
    ids=["german-tail", "no-final-stop", "two-words-stay", "followed-stays", "all", "no-repeat"],
)
def test_whisper_tail_repeat_cut(text: str, kept: str) -> None:
    assert cut_tail_repeat(text) == kept


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "We are arriving on the 21st and leaving on the 24th We are arriving on the 21st"
            " and leaving on the 24th We are arriving on the 21st",
            "We are arriving on the 21st and leaving on the 24th",
        ),
        (
            "could you confirm that my flight leaves at 6 45 in the morning. Good you confirm"
            " that my flight leaves at 6 45 in the morning. Good you confirm that my",
            "could you confirm that my flight leaves at 6 45 in the morning.",
        ),
        (
            "is breakfast included in the price of $120 a night. His breakfast included in",
            "is breakfast included in the price of $120 a night.",
        ),
        ("I said no, I said no, and left.", "I said no, I said no, and left."),
        ("Thank you, thank you very much.", "Thank you, thank you very much."),
        ("Four four one seven, four four one", "Four four one seven, four four one"),
        ("Book it. Book it. Book it now.", "Book it. Book it. Book it now."),
        ("My card is 4417, my card is 4417 too", "My card is 4417, my card is 4417 too"),
        ("I need a table. I need a table", "I need a table."),
        (
            "My name is Priopetel, that's P-A-T-E-L My name is Priopetel, that's P-A",
            "My name is Priopetel, that's P-A-T-E-L",
        ),
        ("I need a table for two, I need a table for", "I need a table for two,"),
    ],
    ids=[
        "no-sentence-end",
        "first-word-misheard",
        "once-partly",
        "followed-stays",
        "short-stays",
        "three-words-stay",
        "not-to-the-end",
        "followed-by-more",
        "exact",
        "last-word-cut-short",
        "last-word-whole",
    ],
)
def test_whisper_restart_cut(text: str, kept: str) -> None:
    assert cut_restart(text) == kept


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "My date of person for 9 7 or 9,000,000,000,000,000,000",
            "My date of person for 9 7 or 9,000",
        ),
        ("It was 1,234,000,000,000,000,000 dollars.", "It was 1,234,000 dollars."),
        ("$1,000,000,000 and 200,000,000,000,000,000,000,000.", "$1,000,000,000 and 200,000."),
        ("About $1,000,000,000 in all.", "About $1,000,000,000 in all."),
        ("It is 1,000,000,000,000,000 exactly.", "It is 1,000 exactly."),
        ("Call 555,000,123,456,789,012 now.", "Call 555,000,123,456,789,012 now."),
    ],
    ids=[
        "date-loop",
        "leading-groups-kept",
        "billion-stays-loop-cut",
        "billion",
        "ten-to-15",
        "no-repeat",
    ],
)
def test_whisper_number_loop_cut(text: str, kept: str) -> None:
    assert cut_number_loops(text) == kept


def test_whisper_bundled_model_is_a_model() -> None:
    check_model_dir(default_model_dir())


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({}, "model.bin missing"),
        ({"config.json": "{}", "model.bin": "", "tokenizer.json": "{}"}, "not a Whisper model"),
        ({"config.json": "{", "model.bin": "", "tokenizer.json": "{}"}, "not valid JSON"),
        ({"config.json": json.dumps({"suppress_ids": []}), "model.bin": ""}, "no tokenizer"),
    ],
)
def test_whisper_model_dir_not_a_model_refused(
    tmp_path: Path, files: dict[str, str], reason: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(RecognizerUnavailable, match=reason):
        WhisperRecognizer(tmp_path)


def test_whisper_model_dir_missing_refused(tmp_path: Path) -> None:
    with pytest.raises(RecognizerUnavailable, match="does not exist"):
        WhisperRecognizer(tmp_path / "nowhere")


# --- the queue ----------------------------------------------------------------------------


async def test_queue_runs_finals_before_partials_and_skips_partials_when_busy() -> None:
    queue = RecognitionQueue(max_pending=4)
    order: list[str] = []

    def work(name: str, seconds: float = 0.05) -> str:
        time.sleep(seconds)
        order.append(name)
        return name

    try:
        first = asyncio.create_task(queue.run(lambda: work("first", 0.2)))
        await asyncio.sleep(0.05)
        skipped = await queue.run(lambda: work("partial"), partial=True)
        second = asyncio.create_task(queue.run(lambda: work("second")))
        done = [await first, await second]
    finally:
        queue.close()
    assert skipped is None
    assert order == ["first", "second"]
    assert [timed.value for timed in done if timed] == ["first", "second"]
    assert done[1] is not None
    assert done[1].queue_seconds >= 0.1  # it waited for the first
    assert done[0] is not None
    assert done[0].compute_seconds >= 0.2


async def test_queue_over_max_pending_finals_refused() -> None:
    queue = RecognitionQueue(max_pending=1)
    try:
        running = asyncio.create_task(queue.run(lambda: time.sleep(0.2)))
        await asyncio.sleep(0.02)
        waiting = asyncio.create_task(queue.run(lambda: None))
        await asyncio.sleep(0.02)
        with pytest.raises(RecognizerOverloaded):
            await queue.run(lambda: None)
        await running
        await waiting
    finally:
        queue.close()


async def test_queue_cancelled_caller_job_skipped() -> None:
    queue = RecognitionQueue()
    ran: list[str] = []
    try:
        busy = asyncio.create_task(queue.run(lambda: time.sleep(0.1)))
        await asyncio.sleep(0.02)
        gone = asyncio.create_task(queue.run(lambda: ran.append("gone")))
        await asyncio.sleep(0.01)
        gone.cancel()
        await busy
        await queue.run(lambda: ran.append("kept"))
    finally:
        queue.close()
    assert ran == ["kept"]


async def test_queue_finals_waiting_together_run_as_one_batch() -> None:
    """Finals with the same batch function and key that wait while another decode runs are
    run in one call, each caller getting its own result; another key waits for its own."""
    queue = RecognitionQueue(max_batch=3)
    calls: list[list[str]] = []

    def batch(items: list[str]) -> list[str]:
        calls.append(list(items))
        return [item.upper() for item in items]

    try:
        busy = asyncio.create_task(queue.run(lambda: time.sleep(0.2)))
        await asyncio.sleep(0.02)
        waiting = [
            asyncio.create_task(queue.run_batched(batch, name, key=key))
            for name, key in [("a", 1), ("b", 1), ("other", 2), ("c", 1), ("d", 1)]
        ]
        await busy
        results = [await task for task in waiting]
    finally:
        queue.close()
    assert [r.value for r in results] == ["A", "B", "OTHER", "C", "D"]
    assert calls == [["a", "b", "c"], ["other"], ["d"]]  # at most max_batch, in order
    assert results[0].compute_seconds == results[1].compute_seconds  # one call
    assert all(r.queue_seconds >= 0.15 for r in results)


async def test_queue_batch_failure_reaches_every_caller_and_the_queue_goes_on() -> None:
    queue = RecognitionQueue()

    def broken(items: list[int]) -> list[int]:
        raise RuntimeError(f"decoder failed on {len(items)}")

    try:
        busy = asyncio.create_task(queue.run(lambda: time.sleep(0.1)))
        await asyncio.sleep(0.02)
        failing = [asyncio.create_task(queue.run_batched(broken, n)) for n in range(2)]
        await busy
        for task in failing:
            with pytest.raises(RuntimeError, match="decoder failed on 2"):
                await task
        after = await queue.run(lambda: "next")
    finally:
        queue.close()
    assert after is not None
    assert after.value == "next"


async def test_whisper_finals_decoded_together_hear_what_each_alone_hears() -> None:
    """Finals of different lengths, with and without a forced prefix, that wait together are
    decoded in one call, with the same words as one at a time."""
    recognizer = WhisperRecognizer()
    await recognizer.warm_up()
    batches: list[int] = []
    decode_many = recognizer._decode_many

    def counting(requests: list[Any]) -> list[tuple[str, str]]:
        batches.append(len(requests))
        return decode_many(requests)

    recognizer._decode_many = counting  # type: ignore[method-assign]
    cases = [
        (speech.SENTENCES[0], ""),
        (speech.SENTENCES[3], "My package arrived damaged"),
        (speech.SENTENCES[6], ""),
        (speech.SENTENCES[10], "How much does it"),
    ]
    heard = [as_received(AudioFormat.PCM_16000, sentence) for sentence, _ in cases]
    try:
        alone = [
            await recognizer.transcribe(h, language="en", prefix=prefix)
            for h, (_, prefix) in zip(heard, cases, strict=True)
        ]
        assert batches == [1, 1, 1, 1]
        blocker = asyncio.create_task(recognizer.transcribe(heard[0], language="en"))
        await asyncio.sleep(0)  # the blocker runs; the others wait together
        together = await asyncio.gather(
            *(
                recognizer.transcribe(h, language="en", prefix=prefix)
                for h, (_, prefix) in zip(heard, cases, strict=True)
            )
        )
        await blocker
    finally:
        await recognizer.aclose()
    assert batches[4:] == [1, 4]
    assert [r.text for r in together if r] == [r.text for r in alone if r]
    for (sentence, _), result in zip(cases, together, strict=True):
        assert result is not None
        assert speech.word_errors(sentence, result.text) == 0, result.text


@pytest.mark.parametrize(
    ("sentence", "keywords"),
    [
        ("I live on Kilbride Street.", "Kilbride Street"),
        ("Please send it to Siobhan Quirke.", "Siobhan Quirke"),
        ("My order number starts with Xylo.", "Xylo"),
    ],
    ids=["street", "name", "product"],
)
async def test_whisper_keywords_prompt_spells_the_agents_words(
    sentence: str, keywords: str
) -> None:
    """The agent's boosted keywords, as Whisper's initial prompt, fix words it mishears
    without them ("Cobride Street", "the Open Quirk", "silo"), and never leak into the text."""
    recognizer = WhisperRecognizer()
    heard = as_received(AudioFormat.PCM_16000, sentence)
    try:
        plain = await recognizer.transcribe(heard, language="en")
        helped = await recognizer.transcribe(heard, language="en", prompt=keywords)
    finally:
        await recognizer.aclose()
    assert plain is not None
    assert helped is not None
    assert keywords.lower() not in plain.text.lower(), plain.text
    assert keywords.lower() in helped.text.lower(), helped.text
    assert speech.word_errors(sentence, helped.text) == 0, helped.text


async def test_whisper_beam_size_beam_search_on_finals_only() -> None:
    """PARLEY_STT_BEAM_SIZE: a turn's final decode searches that many beams (and hears the
    sentence); a partial stays greedy."""
    recognizer = WhisperRecognizer(beam_size=4)
    await recognizer.warm_up()
    whisper = recognizer._model.model
    beams: list[int] = []

    class Recorded:
        """The real model, its generate() calls' beam sizes recorded."""

        def __getattr__(self, name: str) -> Any:
            return getattr(whisper, name)

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            beams.append(kwargs["beam_size"])
            return whisper.generate(*args, **kwargs)

    recognizer._model.model = Recorded()
    sentence = speech.SENTENCES[2]
    heard = as_received(AudioFormat.PCM_16000, sentence)
    try:
        final = await recognizer.transcribe(heard, language="en")
        partial = await recognizer.transcribe(heard, language="en", partial=True)
    finally:
        recognizer._model.model = whisper
        await recognizer.aclose()
    assert beams == [4, 1]
    assert final is not None
    assert partial is not None
    assert speech.word_errors(sentence, final.text) == 0, final.text


@pytest.mark.parametrize("beam_size", [0, 11])
def test_whisper_beam_size_outside_1_to_10_refused(beam_size: int) -> None:
    with pytest.raises(ValueError, match="beam_size"):
        WhisperRecognizer(beam_size=beam_size)


def test_whisper_beam_size_setting_reaches_the_recognizer(settings_factory: Any) -> None:
    from parley.composition.options import engine_options
    from parley.engine import build_engine_factory

    options = engine_options(settings_factory(stt_beam_size=5))
    assert options.stt_beam_size == 5
    assert build_engine_factory(options).recognizer._beam_size == 5


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "My dear brother, I'm from the 9th of November, I'm from the 9th of November, I'm"
            " the 8th of November",
            "My dear brother, I'm from the 9th of November, I'm the 8th of November",
        ),
        (
            "My name is Priya Patel, my name is Priya Patel, my city girl",
            "My name is Priya Patel, my city girl",
        ),
        (
            "a b c d e f a b c d e f a b c d e f g",
            "a b c d e f g",
        ),
        ("Four four one seven, four four one seven.", "Four four one seven, four four one seven."),
        ("I said no, I said no, and left.", "I said no, I said no, and left."),
        (
            "the reference is 742 Hine, the reference is 67425 Hine",
            "the reference is 742 Hine, the reference is 67425 Hine",
        ),
    ],
    ids=[
        "mid-sentence",
        "then-other-words",
        "three-times",
        "four-words-stay",
        "short-stays",
        "not-verbatim-stays",
    ],
)
def test_whisper_phrase_repeat_cut(text: str, kept: str) -> None:
    assert cut_phrase_repeat(text) == kept


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "the parcel weighs about eight kilos and a 60 centimeters long. About eight kilos"
            " and a 60 centimeters",
            "the parcel weighs about eight kilos and a 60 centimeters long.",
        ),
        (
            "where you would like a wind or seat in rotating, please. We would like a wind or"
            " seat in rotating, please.",
            "where you would like a wind or seat in rotating, please.",
        ),
        (
            "Hello, I'd like a window seat, please. We'd like a window seat, please.",
            "Hello, I'd like a window seat, please.",
        ),
        (
            "My booking is for the 21st and the 22nd. Booking is for the 21st and the 22",
            "My booking is for the 21st and the 22nd.",
        ),
        (
            "the parcel left on the 3rd of May, last week. Left on the 3rd of May",
            "the parcel left on the 3rd of May, last week.",
        ),
        (
            "the parcel left on the 3rd of May, early last week. Left on the 3rd of May",
            "the parcel left on the 3rd of May, early last week. Left on the 3rd of May",
        ),
        ("I said no, I said no, and left.", "I said no, I said no, and left."),
        (
            "one two three four five. One two three four five six.",
            "one two three four five. One two three four five six.",
        ),
        ("It was late. It was very late.", "It was late. It was very late."),
        (
            "the room was cold and dark. So the room was cold and dark, said the manager",
            "the room was cold and dark. So the room was cold and dark, said the manager",
        ),
    ],
    ids=[
        "after-a-sentence-end",
        "first-word-misheard",
        "from-the-second-word",
        "last-word-cut-short",
        "two-words-between",
        "three-words-between-stay",
        "not-a-sentence-start-stays",
        "followed-by-more-stays",
        "four-words-stay",
        "not-to-the-end-stays",
    ],
)
def test_whisper_tail_echo_cut(text: str, kept: str) -> None:
    assert cut_tail_echo(text) == kept


def test_whisper_decoder_repeats_cut_by_every_guard() -> None:
    looped = "I need $1,000, $1,000, $1,000, $1,000 for the room. For the room."
    assert cut_decoder_repeats(looped) == "I need $1,000, for the room."
    echoed = "it weighs about eight kilos and a bit. About eight kilos and a bit"
    assert cut_decoder_repeats(echoed) == "it weighs about eight kilos and a bit."


async def test_whisper_words_timed_on_a_final_only_when_asked() -> None:
    """Redaction's tone (API.md section 16) needs the words' times: asked for, the words of
    the transcript come with them, and a number the redactor tags is timed where it was
    said (within the alignment's few hundred ms); not asked, the decode is as before."""
    lead, said = speech.spoken("Call me at"), speech.spoken(PHONE_NUMBER_WORDS)
    audio = np.concatenate(
        [speech.silence(0.2), lead, speech.silence(0.3), said, speech.silence(0.3)]
    )
    voiced = np.flatnonzero(np.abs(said) > 0.01) / speech.RATE + 0.2 + lead.size / speech.RATE + 0.3
    samples = resample(audio, speech.RATE, 16_000)
    utterance = Utterance(samples, 16_000, samples.size / 16_000)
    recognizer = WhisperRecognizer()
    plain = await recognizer.transcribe(utterance, language="en")
    timed = await recognizer.transcribe(utterance, language="en", words=True)
    assert plain is not None
    assert timed is not None
    assert plain.words == ()
    assert timed.text == plain.text
    assert join_words(timed.words) == " ".join(timed.text.split())
    starts = [word.start for word in timed.words]
    assert starts == sorted(starts)
    assert all(word.start <= word.end for word in timed.words)
    (toned,) = tone_spans(timed.words, redact(join_words(timed.words)).spans)
    # The tone's 0.25 s pad included. Whisper's word ends fall later on some CPUs than on
    # others (int8 kernels round differently: 0.51 s after the last voiced sample on an AMD
    # EPYC, against under 0.35 s on the Intel hosts this was written on); a tone that runs
    # on a little is the safe side, one that starts late is not, hence the asymmetry.
    assert voiced[0] - 0.6 < toned[0] < voiced[0] + 0.3, (toned, voiced[0])
    assert voiced[-1] - 0.3 < toned[1] < voiced[-1] + 0.8, (toned, voiced[-1])


def test_whisper_timed_words_follow_the_words_the_guards_left() -> None:
    aligned = [Word("I'm", 0.0, 0.2), Word("I'm", 0.2, 0.4), Word("I'm", 0.4, 0.6)]
    aligned += [Word("0142.", 0.6, 1.5)]
    looped = timed_words("I'm 0142.", aligned)  # cut_loops kept one "I'm"
    assert [w.text for w in looped] == ["I'm", "0142."]
    assert (looped[1].start, looped[1].end) == (0.6, 1.5)
    number = timed_words(
        "It is 9,000", [Word("It", 0, 1), Word("is", 1, 2), Word("9,000,000", 2, 3)]
    )
    assert number[2] == Word("9,000", 2, 3)  # a word a guard shortened: its time
    inserted = timed_words("a b c", [Word("a", 0, 1), Word("c", 2, 3)])
    assert inserted[1] == Word("b", 1, 2)  # no time of its own: between its neighbours
    assert timed_words("words", []) == ()


async def test_whisper_words_timed_in_a_batch_as_when_decoded_alone() -> None:
    """A batch's encoder output is aligned one utterance at a time: the same words, at the
    same times (within a quarter of a second: the batch pads each utterance to the longest,
    which moves a word's edge by a frame or two on Intel hosts and by up to 0.2 s on an AMD
    EPYC, whose int8 kernels round otherwise)."""
    recognizer = WhisperRecognizer()
    await recognizer.warm_up()
    heard = [as_received(AudioFormat.PCM_16000, speech.SENTENCES[n]) for n in (0, 3)]
    requests = [_Request(h.samples, "en", "", "", final=True, words=True) for h in heard]
    alone = [recognizer._decode_many([request])[0] for request in requests]
    together = recognizer._decode_many(requests)
    for (text, _, words), (alone_text, _, alone_words) in zip(together, alone, strict=True):
        assert text == alone_text
        assert [w.text for w in words] == [w.text for w in alone_words]
        for word, alone_word in zip(words, alone_words, strict=True):
            assert word.start == pytest.approx(alone_word.start, abs=0.25)
            assert word.end == pytest.approx(alone_word.end, abs=0.25)
