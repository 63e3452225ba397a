"""`tts.stream`'s first audio byte (API.md section 17; issue #41's goal: at most 150 ms after
the request for a two-sentence text), against its peers in the same run.

Run: `.venv/bin/python bench/tts_stream.py [--requests 20]`.

It starts `parley serve` (embedded mode, an empty directory) and, after one warm-up request
of each kind, times `--requests` requests of each, one at a time over one kept-alive
connection:

- `POST /v1/tts/stream` of a two-sentence text: the first body byte after the request was
  sent, and the last;
- the same for a sixteen-sentence text (what streaming saves grows with the text);
- `POST /v1/tts` (the voices preview) of the two sentences: the whole WAV;
- in this process, the synthesizer called directly (hibari, the server's voice): the
  first sentence alone, and both sentences with their resampling to pcm_16000, the floor
  any server answer stands on.

It prints medians and 95th percentiles, and the ratios of the stream's first byte to the
peers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' speech and server

from tests import speech
from tests.faults.serve_process import ServeProcess

from parley.engine import AudioFormat, load_synthesizer, sentences_of
from parley.engine.audio import render

TWO_SENTENCES = "Thanks for calling the bistro. Your table for two is booked for seven tonight."
LONG_TEXT = " ".join(speech.SENTENCES[:16])


def percentiles(values: list[float]) -> tuple[float, float]:
    """(median, 95th percentile) in milliseconds."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


def time_stream(http: httpx.Client, text: str) -> tuple[float, float]:
    """(first byte, last byte) seconds after the request of one `POST /v1/tts/stream`."""
    started = time.perf_counter()
    first = 0.0
    with http.stream("POST", "/v1/tts/stream", json={"text": text}) as response:
        response.raise_for_status()
        for part in response.iter_raw():
            if part and not first:
                first = time.perf_counter() - started
    return first, time.perf_counter() - started


def time_preview(http: httpx.Client, text: str) -> float:
    started = time.perf_counter()
    http.post("/v1/tts", json={"text": text}).raise_for_status()
    return time.perf_counter() - started


def in_process(text: str, rounds: int) -> tuple[list[float], list[float]]:
    """(first sentence, all sentences rendered to pcm_16000) by the synthesizer directly."""
    synthesizer = load_synthesizer()
    voice = synthesizer.default_voice
    sentences = sentences_of(text)

    async def run() -> tuple[list[float], list[float]]:
        await synthesizer.warm_up()
        firsts, wholes = [], []
        for _ in range(rounds + 1):
            started = time.perf_counter()
            for index, sentence in enumerate(sentences):
                samples = await synthesizer.synthesize(sentence, voice=voice)
                render(samples, synthesizer.sample_rate, AudioFormat.PCM_16000)
                if index == 0:
                    firsts.append(time.perf_counter() - started)
            wholes.append(time.perf_counter() - started)
        return firsts[1:], wholes[1:]  # the first round warms up

    return asyncio.run(run())


def repeat(rounds: int, measure: Callable[[], float]) -> list[float]:
    measure()  # warm-up
    return [measure() for _ in range(rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    rounds: int = args.requests
    with tempfile.TemporaryDirectory() as directory:
        server = ServeProcess(Path(directory))
        server.start()
        try:
            headers = {"Authorization": f"Bearer {server.first_key}"}
            with httpx.Client(base_url=server.http, headers=headers, timeout=60) as http:
                short = [time_stream(http, TWO_SENTENCES) for _ in range(rounds + 1)][1:]
                long = [time_stream(http, LONG_TEXT) for _ in range(rounds + 1)][1:]
                preview = repeat(rounds, lambda: time_preview(http, TWO_SENTENCES))
        finally:
            server.ensure_stopped()
    direct_first, direct_whole = in_process(TWO_SENTENCES, rounds)
    rows = {
        "stream, 2 sentences: first byte": [first for first, _ in short],
        "stream, 2 sentences: last byte": [last for _, last in short],
        "stream, 16 sentences: first byte": [first for first, _ in long],
        "stream, 16 sentences: last byte": [last for _, last in long],
        "preview (POST /v1/tts), 2 sentences": preview,
        "in-process synthesis: first sentence": direct_first,
        "in-process synthesis: 2 sentences": direct_whole,
    }
    print(f"{rounds} requests each, one at a time")
    print(f"{'':42} {'median ms':>10} {'p95 ms':>8}")
    medians = {}
    for name, values in rows.items():
        median, p95 = percentiles(values)
        medians[name] = median
        print(f"{name:42} {median:10.1f} {p95:8.1f}")
    first = medians["stream, 2 sentences: first byte"]
    print()
    print(f"goal: first byte <= 150 ms: {'met' if first <= 150 else 'MISSED'} ({first:.0f} ms)")
    for peer in (
        "in-process synthesis: first sentence",
        "preview (POST /v1/tts), 2 sentences",
        "stream, 2 sentences: last byte",
    ):
        print(f"first byte / {peer}: {first / medians[peer]:.2f}")
    long_ratio = (
        medians["stream, 16 sentences: first byte"] / medians["stream, 16 sentences: last byte"]
    )
    print(f"16 sentences: first byte / last byte: {long_ratio:.2f}")


if __name__ == "__main__":
    main()
