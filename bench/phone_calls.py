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

Part 3 (issue #39): `--outbound` calls placed at once through `POST
/v1/conversations/outbound_call`, against the simulated carrier's REST API
(tests/carrier_api.py) at `PARLEY_TWILIO_API_URL`. Each callee answers and says one short
sentence in real time. Measured: the placement's answer time (request to 200), beside two
peers in the same run, as many `dry_run` placements (the same checks, no carrier, nothing
stored) and `POST /v1/conversations` (a pending conversation, no carrier); and the welcome's
first `media` frame after the callee's last voiced sample, beside part 1's answer latency
(the same path with a reply to make). Goals: placement p95 <= 150 ms with 20 calls; welcome
<= 300 ms after the callee's words.

Part 4 (issue #39): `--transfers` calls placed at once to an agent with a
`built_in_transfer_to_phone_number` tool, on a second server with an OpenAI-protocol server
on loopback (tests/llm_server.py) as its model. Each callee says hello, hears the welcome,
asks for a person; the model says a sentence and calls the transfer. Measured: from the end
of the agent's last audio frame played (the carrier's clock) to the carrier's update with
the `<Dial>`. Goal: <= 300 ms.
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
from tests.carrier import PHONE, MediaStream, SimulatedCarrier, phone_frames
from tests.carrier_api import CarrierApi
from tests.carrier_calls import Person
from tests.llm_server import Call, Round, running_chat_server

CALLEE_WORDS = "Hello, Sam speaking."
RING_S = 2.0
ANSWER_GAP = [0.3]
"""Part 3's callees answer this far apart, in seconds (`--answer-gap`)."""
CALLEE_LEAD_S = 0.2
"""tests/carrier_calls.py's silence before a callee's words."""
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


async def set_up(base: str, key: str, api: CarrierApi) -> Line:
    """The account is the simulated REST API's too: parts 1 and 2 post its webhooks
    themselves, part 3 has Parley place calls through the API (PARLEY_PUBLIC_URL follows
    the server's --port, so the carrier's callbacks reach it)."""
    http = httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"})
    carrier = SimulatedCarrier(
        http=http,
        voice_url=f"{base}/v1/telephony/twilio/voice",
        account_sid=api.account_sid,
        auth_token=api.auth_token,
    )
    body = {"account_sid": carrier.account_sid, "auth_token": carrier.auth_token}
    (await http.put("/v1/telephony/twilio", json=body)).raise_for_status()
    number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
    agent = {
        "name": "bench",
        "welcome_message": "Hello, this is the Grand Hotel calling about your booking.",
        "phone_numbers": [number],
    }
    (await http.post("/v1/agents", json=agent)).raise_for_status()
    # Parts 1 and 2 measure answers to the caller's words: an agent without a welcome.
    quiet = {"name": "bench-in", "welcome_message": None, "phone_numbers": ["+15005550111"]}
    (await http.post("/v1/agents", json=quiet)).raise_for_status()
    return Line(http, carrier, "+15005550111", base.replace("http://", "ws://"))


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
            speech_end = stream.speech_started_at + LEAD_S + voiced_end(sentence, PHONE)
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


async def timed_posts(line: Line, path: str, bodies: list[dict[str, object]]) -> list[float]:
    """POST every body at once; return each answer's time (each must be a 2xx)."""

    async def one(body: dict[str, object]) -> float:
        started = time.monotonic()
        response = await line.http.post(path, json=body)
        elapsed = time.monotonic() - started
        response.raise_for_status()
        return elapsed

    return list(await asyncio.gather(*(one(body) for body in bodies)))


async def outbound(
    line: Line, api: CarrierApi, calls: int, first: int = 0
) -> tuple[list[float], list[float]]:
    """Part 3: `calls` calls placed at once (the API's calls `first` on); return (placement
    times, welcome latencies)."""
    speech.spoken(CALLEE_WORDS)  # rendered before the clock runs
    words_end = CALLEE_LEAD_S + voiced_end(CALLEE_WORDS, PHONE)

    def placing(n: int, dry_run: bool = False) -> dict[str, object]:
        to = f"+1628555{n:04d}"
        return {"to_phone_number": to, "config": {"agent": "bench"}, "dry_run": dry_run}

    # Phones ring a while (2 s and more): the placements are answered before the calls are,
    # and callees pick up at their own pace (0.3 s apart here; `--answer-gap 0`: all at once).
    api.script(
        *(
            Person(words=CALLEE_WORDS, amd=None, ring_s=RING_S + ANSWER_GAP[0] * n)
            for n in range(calls)
        )
    )
    placed = await timed_posts(
        line, "/v1/conversations/outbound_call", [placing(n) for n in range(calls)]
    )
    welcomes: list[float] = []
    for index in range(first, first + calls):
        call = await api.wait_call(index)
        deadline = time.monotonic() + 30
        while True:
            stream = call.streams[0] if call.streams else None
            started = stream.speech_started_at if stream else None
            if stream is not None and started is not None:
                spoken_end = started + words_end
                after = [at for at in stream.heard.first_media_at if at > spoken_end]
                if after:
                    welcomes.append(after[0] - spoken_end)
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"call {index}: no welcome ({call.callbacks[-3:]})")
            await asyncio.sleep(0.01)
    for index in range(first, first + calls):
        conversation = (await api.wait_call(index)).field("Url") or ""
        conversation_id = conversation.rpartition("=")[2]
        await line.http.post(f"/v1/conversations/{conversation_id}/cancel")
    return placed, welcomes


ASKS = "I would like to talk to a person please."


async def transfers(calls: int) -> list[float]:
    """Part 4: the carrier's update after the agent's last word, per call."""
    with running_chat_server() as chat, tempfile.TemporaryDirectory() as directory:
        said = ["Putting you through now."]
        chat.script.forever = Round(text=said, calls=[Call("to_desk", ["{}"], id="call_1")])
        api = await CarrierApi().__aenter__()
        model = {"PARLEY_LLM_BASE_URL": chat.base_url, "PARLEY_LLM_MODEL": "m"}
        process, base, key, _log = start_server(
            Path(directory), {"PARLEY_TWILIO_API_URL": api.url, **model}
        )
        try:
            line = await set_up(base, key, api)
            tool = {"name": "to_desk", "type": "built_in_transfer_to_phone_number",
                    "phone_number": "+14155550188"}  # fmt: skip
            (await line.http.post("/v1/tools", json=tool)).raise_for_status()
            patch = {"tools": ["to_desk"]}
            (await line.http.patch("/v1/agents/bench", json=patch)).raise_for_status()
            for text in (CALLEE_WORDS, ASKS):
                speech.spoken(text)
            api.script(*(Person(words=CALLEE_WORDS, amd=None) for _ in range(calls)))
            body = {"to_phone_number": "+16285550000", "config": {"agent": "bench"}}
            await timed_posts(line, "/v1/conversations/outbound_call", [body] * calls)
            latencies = await asyncio.gather(*(_transferred(api, n) for n in range(calls)))
            await line.http.aclose()
            return list(latencies)
        finally:
            process.terminate()
            process.wait(30)
            await api.__aexit__(None, None, None)


async def _transferred(api: CarrierApi, index: int) -> float:
    call = await api.wait_call(index)
    deadline = time.monotonic() + 60
    while not call.streams:
        if time.monotonic() > deadline:
            raise RuntimeError(f"call {index} never streamed")
        await asyncio.sleep(0.02)
    stream = call.streams[0]
    await stream.wait_played(1.0, within=30)
    await stream.wait_silent(within=30)
    await stream.speak(phone_frames(0.2, speech.spoken(ASKS), 0.3))
    while not call.dials:
        if time.monotonic() > deadline:
            raise RuntimeError(f"call {index} was never transferred")
        await asyncio.sleep(0.01)
    update = next(r for r in api.requests if r.field("Twiml") and call.sid in r.path)
    last_frame = max(at for at, _ in stream.heard.played if at < update.at)
    return update.at - (last_frame + 0.02)


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
    parser.add_argument("--outbound", type=int, default=20, help="part 3's calls placed at once")
    parser.add_argument("--transfers", type=int, default=5, help="part 4's calls at once")
    parser.add_argument(
        "--answer-gap", type=float, default=ANSWER_GAP[0], help="part 3: seconds between answers"
    )
    parser.add_argument("--only", choices=["outbound", "transfers"], help="run that part alone")
    args = parser.parse_args()
    ANSWER_GAP[0] = args.answer_gap
    if args.only != "transfers":
        await parts_1_to_3(args)
    if args.transfers and args.only != "outbound":
        after = await transfers(args.transfers)
        print(
            f"{args.transfers} transfers at once: the carrier's update after the agent's last "
            f"word p50 {percentile(after, 50):.3f} s p95 {percentile(after, 95):.3f} s "
            f"max {max(after):.3f} s"
        )


async def parts_1_to_3(args: argparse.Namespace) -> None:
    sentences = list(speech.SENTENCES)
    with tempfile.TemporaryDirectory() as directory:
        api = await CarrierApi().__aenter__()
        process, base, key, _log = start_server(Path(directory), {"PARLEY_TWILIO_API_URL": api.url})
        try:
            line = await set_up(base, key, api)
            for sentence in sentences:
                speech.spoken(sentence)  # rendered before the clock runs
            chosen = [sentences[i % len(sentences)] for i in range(args.turns)]
            turns, conversation_id = await call(line, chosen)
            heard = await heard_words(line, conversation_id)
            wer = word_error_rate(chosen, heard)
            print(report("one call", [t.latency for t in turns]))
            print(f"one call: word error rate on the phone band {100 * wer:.1f} %")
            if args.calls and args.only is None:
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
            if args.outbound:
                await part_3(line, api, args.outbound, turns)
            await line.http.aclose()
        finally:
            process.terminate()
            process.wait(30)
            await api.__aexit__(None, None, None)


async def part_3(line: Line, api: CarrierApi, n: int, turns: list[Turn]) -> None:
    dry = await timed_posts(
        line,
        "/v1/conversations/outbound_call",
        [{"to_phone_number": "+16285550000", "config": {"agent": "bench"}, "dry_run": True}] * n,
    )
    pending = await timed_posts(line, "/v1/conversations", [{"agent": "bench"}] * n)
    # A first batch, not measured: the process loads its per-stream models (a Silero VAD per
    # concurrent call, never unloaded) the first time it holds that many calls at once.
    await outbound(line, api, n)
    placed, welcomes = await outbound(line, api, n, first=n)
    p95 = percentile(placed, 95)
    print(
        f"{n} outbound calls at once: placement p50 {percentile(placed, 50):.3f} s "
        f"p95 {p95:.3f} s; peers p95: dry_run {percentile(dry, 95):.3f} s "
        f"(x{p95 / percentile(dry, 95):.2f}), POST /v1/conversations "
        f"{percentile(pending, 95):.3f} s (x{p95 / percentile(pending, 95):.2f})"
    )
    inbound_p50 = percentile([t.latency for t in turns], 50)
    print(
        f"{n} outbound calls: welcome after the callee's words p50 "
        f"{percentile(welcomes, 50):.3f} s p95 {percentile(welcomes, 95):.3f} s "
        f"max {max(welcomes):.3f} s; part 1's answer p50 {inbound_p50:.3f} s "
        f"(x{percentile(welcomes, 50) / inbound_p50:.2f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
