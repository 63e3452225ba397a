"""Phone calls through the simulated Twilio carrier: end of the caller's speech to the first
answer `media` frame, and word errors on the phone band (issue #19's goals).

Run: `.venv/bin/python bench/phone_calls.py [--turns 22] [--calls 16] [--call-turns 5]`.

It starts `parley serve` (embedded SQLite, default engine: faster-whisper tiny.en, Silero
VAD, hibari-tts, rule-based replies) as its own process on a free loopback port, sets a
Twilio account and an agent with a phone number, and calls it as Twilio would
(tests/carrier.py): the signed voice webhook, then the media stream named by the TwiML,
with `media` frames sent every 20 ms (hibari sentences turned into 8 kHz mu-law, silence
between them) and the agent's audio played in real time with its marks echoed. Per turn:

- latency: from the last voiced sample of the sentence (known from the audio) to the
  arrival of the answer's first `media` frame, on the carrier's clock;
- the words stored as the caller's item, scored against the sentence (word error rate).

Part 1: one call of `--turns` turns (the bench's sentences in turn): p50/p95 latency and WER.
Part 2: `--calls` calls at once on the one process (started within a second of each other),
each of `--call-turns` turns: p50/p95.
The caller starts its next sentence 0.5 s into each answer (a barge-in: the server clears
the answer), as in a brisk conversation. Goals: part 1 p50 <= 0.6 s and WER <= 5 %;
part 2 p95 <= 1.5 s with 16 calls.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.voice_turn import percentile, start_server, voiced_end
from tests import speech
from tests.carrier import MediaStream, SimulatedCarrier, phone_frames

PUBLIC_URL = "https://parley.bench"
MEDIA_PATH = "/v1/telephony/twilio/media"
LEAD_S = 0.3
"""Silence before each sentence."""


@dataclass
class Turn:
    sentence: str
    latency: float


@dataclass
class Line:
    http: httpx.AsyncClient
    carrier: SimulatedCarrier
    number: str
    ws: str


async def set_up(base: str, key: str) -> Line:
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"})
    carrier = SimulatedCarrier(http=http, voice_url=f"{PUBLIC_URL}/v1/telephony/twilio/voice")
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    (await http.put("/v1/telephony/twilio", json=body)).raise_for_status()
    number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
    agent = {
        "name": f"bench{secrets.token_hex(3)}",
        "welcome_message": None,
        "phone_numbers": [number],
    }
    (await http.post("/v1/agents", json=agent)).raise_for_status()
    return Line(http, carrier, number, base.replace("http://", "ws://"))


async def call(line: Line, sentences: list[str], lead_s: float = 0.5) -> tuple[list[Turn], str]:
    """One call: each sentence in real time, then silence until the answer's first frame."""
    twiml = await line.carrier.call(to=line.number)
    if twiml.rejected:
        raise RuntimeError("the call was rejected")
    stream = await MediaStream.open(line.ws + MEDIA_PATH, twiml.parameters)
    turns: list[Turn] = []
    try:
        await asyncio.sleep(lead_s)
        for sentence in sentences:
            await stream.speak(phone_frames(LEAD_S, speech.spoken(sentence)))
            assert stream.speech_started_at is not None
            speech_end = stream.speech_started_at + LEAD_S + voiced_end(sentence)
            deadline = time.monotonic() + 15
            while not (answers := [at for at in stream.heard.first_media_at if at > speech_end]):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"no answer to {sentence!r}: {diagnosis(stream, speech_end)}"
                    )
                await asyncio.sleep(0.005)
            turns.append(Turn(sentence, answers[0] - speech_end))
            await asyncio.sleep(0.5)  # 0.5 s into the answer, the caller speaks again
    finally:
        await stream.stop()
    return turns, twiml.parameters["conversation_id"]


def diagnosis(stream: MediaStream, since: float) -> str:
    """What the carrier saw, in seconds from `since`: clears, answers' first frames."""
    heard = stream.heard
    clears = [round(at - since, 2) for at in heard.clears]
    firsts = [round(at - since, 2) for at in heard.first_media_at]
    return f"clears at {clears}, answers' first frames at {firsts}"


async def heard_words(line: Line, conversation_id: str) -> list[str]:
    """The caller's items as stored (what the server recognised)."""
    for _ in range(50):
        found = (await line.http.get(f"/v1/conversations/{conversation_id}")).json()
        if found["conversation"]["status"] == "ended":
            break
        await asyncio.sleep(0.1)
    items = found["conversation"]["items"]
    return [item["text"] for item in items if item["role"] == "user"]


def word_error_rate(sentences: list[str], heard: list[str]) -> float:
    errors = sum(speech.word_errors(s, h) for s, h in zip(sentences, heard, strict=False))
    missing = sum(len(speech.words(s)) for s in sentences[len(heard) :])
    return (errors + missing) / sum(len(speech.words(s)) for s in sentences)


def report(label: str, latencies: list[float]) -> str:
    return (
        f"{label}: {len(latencies)} turns, latency p50 {percentile(latencies, 50):.3f} s "
        f"p95 {percentile(latencies, 95):.3f} s max {max(latencies):.3f} s"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=len(speech.SENTENCES))
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--call-turns", type=int, default=5)
    args = parser.parse_args()
    sentences = list(speech.SENTENCES)
    with tempfile.TemporaryDirectory() as directory:
        process, base, key, _log = start_server(Path(directory), {"PARLEY_PUBLIC_URL": PUBLIC_URL})
        try:
            line = await set_up(base, key)
            for sentence in sentences:
                speech.spoken(sentence)  # rendered before the clock runs
            chosen = [sentences[i % len(sentences)] for i in range(args.turns)]
            turns, conversation_id = await call(line, chosen)
            heard = await heard_words(line, conversation_id)
            wer = word_error_rate(chosen, heard)
            print(report("one call", [t.latency for t in turns]))
            print(f"one call: word error rate on the phone band {100 * wer:.1f} %")
            runs = [  # staggered within a second, as bench/voice_turn.py's conversations
                call(
                    line,
                    [sentences[(n + i) % len(sentences)] for i in range(args.call_turns)],
                    lead_s=0.5 + 0.137 * n % 1.0,
                )
                for n in range(args.calls)
            ]
            results = await asyncio.gather(*runs)
            latencies = [t.latency for turns_of_call, _ in results for t in turns_of_call]
            print(report(f"{args.calls} calls at once", latencies))
            await line.http.aclose()
        finally:
            process.terminate()
            process.wait(30)


if __name__ == "__main__":
    asyncio.run(main())
