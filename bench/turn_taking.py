"""When does the user's turn end? Both turn detection modes, over the real WebSocket.

Run: `.venv/bin/python bench/turn_taking.py [--sentences 22] [--turns 20] [--modes vad,semantic]
[--format pcm_16000]` (the client's audio; `mulaw_8000` for a phone line).

For each mode it starts `parley serve` with PARLEY_TURN_DETECTION set (embedded SQLite,
default engine, rule-based replies) and talks to it in real time, 20 ms chunks, as
bench/voice_turn.py does:

- pauses: each sentence of tests/speech.py as rendered (no pause: a complete clause then a
  short gap may already end a turn), then with a pause of 500 ms, then of 800 ms, after one
  of its words that leave the thought plainly unfinished ("for", "the", "my"...; the middle
  such word of the sentence, tests/pauses.py), then 2 s of silence, one conversation each.
  A trial whose sentence became two turns (two `user_finished_speaking`) was cut off;
- latency: `--turns` complete sentences in one conversation, from the last voiced sample to
  the first `audio_chunk` of the answer (bench/voice_turn.py's measure), p50 and p95.

It also times the end-of-turn model alone in this process (the features and one inference
on 8 s of speech, one thread), and prints the issue's goals and whether each holds. The
figures are noisy on a shared machine: compare the modes within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.voice_turn import (
    conversation,
    make_bench_agent,
    percentile,
    send_audio,
    server_figures,
    start_server,
)
from tests import pauses, speech

from parley.engine import AudioFormat, SmartTurn
from parley.engine.audio import resample

CHUNK_S = 0.02
GOALS = {"500 ms pause ends the turn": 0.05, "800 ms pause ends the turn": 0.15}
LATENCY_GOALS = (0.30, 0.45)  # p50, p95 in seconds


async def turns_in(ws_url: str, key: str, audio: np.ndarray, fmt: AudioFormat) -> int:
    """Stream one utterance and 2 s of silence in real time; return how many turns ended."""
    async with connect(
        f"{ws_url}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {key}"}
    ) as ws:
        config = {"type": "config", "agent": "bench", "input_format": fmt.value}
        await ws.send(json.dumps(config | {"output_format": fmt.value}))
        while json.loads(await ws.recv())["type"] != "ready_to_start_conversation":
            pass
        finished = 0

        async def read() -> None:
            nonlocal finished
            async for raw in ws:
                if json.loads(raw)["type"] == "user_finished_speaking":
                    finished += 1

        reader = asyncio.create_task(read())
        clock = time.monotonic()
        for chunk in speech.stream(fmt, 0.3, audio, 2.0):
            await send_audio(ws, chunk)
            clock += CHUNK_S
            await asyncio.sleep(max(0.0, clock - time.monotonic()))
        await asyncio.sleep(0.3)  # a verdict or a decode still on its way
        reader.cancel()
    return finished


def trials(count: int) -> list[tuple[str, float]]:
    """(sentence, where its pause goes): the middle holding word of each sentence."""
    chosen = []
    for sentence in speech.SENTENCES[:count]:
        points = pauses.pause_points(sentence)
        if points:
            chosen.append((sentence, points[len(points) // 2][1]))
    return chosen


async def model_alone(runs: int = 30) -> tuple[float, float]:
    """p50 and p95 milliseconds of one end-of-turn check (features + inference) in-process."""
    model = SmartTurn()
    await model.warm_up()
    audio = resample(
        np.concatenate([speech.spoken(s) for s in speech.SENTENCES[:3]]), speech.RATE, 16_000
    )
    times = [model.predict(audio)[1] * 1000 for _ in range(runs)]
    await model.aclose()
    return percentile(times, 50), percentile(times, 95)


async def measure_mode(
    mode: str, cases: list[tuple[str, float]], turns: int, fmt: AudioFormat
) -> dict[str, float]:
    """Cut-off shares and latency percentiles of one mode, the client speaking `fmt`."""
    with tempfile.TemporaryDirectory() as directory:
        process, base, key, log = start_server(Path(directory), {"PARLEY_TURN_DETECTION": mode})
        try:
            await make_bench_agent(base, key)
            ws_url = base.replace("http://", "ws://")
            figures: dict[str, float] = {}
            for pause_s in (0.0, 0.5, 0.8):
                cut = 0
                for sentence, at in cases:
                    audio, _, _ = pauses.with_pause(sentence, at, pause_s)
                    cut += await turns_in(ws_url, key, audio, fmt) >= 2
                figures[f"{round(pause_s * 1000)} ms pause ends the turn"] = cut / len(cases)
            sentences = [speech.SENTENCES[i % len(speech.SENTENCES)] for i in range(turns)]
            start = time.monotonic()
            latencies = [t.latency for t in await conversation(ws_url, key, fmt, sentences, 0.2)]
            print(f"{mode}: {server_figures(log, start, time.monotonic())}")
            figures["p50"] = percentile(latencies, 50)
            figures["p95"] = percentile(latencies, 95)
        finally:
            process.terminate()
            process.wait(timeout=15)
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=len(speech.SENTENCES))
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--modes", default="vad,semantic")
    parser.add_argument(
        "--format", default=AudioFormat.PCM_16000.value, help="the client's audio: pcm_16000, ..."
    )
    args = parser.parse_args()
    fmt = AudioFormat(args.format)
    cases = trials(args.sentences)
    load = os.getloadavg()[0]
    print(f"cpu cores: {os.cpu_count()}; load average (1 min) at start: {load:.2f}")
    p50, p95 = await model_alone()
    print(
        f"end-of-turn model alone (features + inference, 1 thread): p50 {p50:.0f} ms, "
        f"p95 {p95:.0f} ms"
    )
    print(f"pause trials per length: {len(cases)}; latency turns: {args.turns}; {fmt.value}")
    results = {
        mode: await measure_mode(mode, cases, args.turns, fmt) for mode in args.modes.split(",")
    }
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}\n")
    print(
        "mode       no pause: split  500 ms pause cut  800 ms pause cut  p50 latency  p95 latency"
    )
    for mode, f in results.items():
        print(
            f"{mode:<10} {f['0 ms pause ends the turn']:>15.0%}  "
            f"{f['500 ms pause ends the turn']:>16.0%}  "
            f"{f['800 ms pause ends the turn']:>16.0%}  {f['p50']:9.3f} s  {f['p95']:9.3f} s"
        )
    for mode, f in results.items():
        print(f"\ngoals, {mode}:")
        for name, limit in GOALS.items():
            held = f[name] <= limit
            print(f"  {name} <= {limit:.0%}: {f[name]:.0%}, {'met' if held else 'NOT met'}")
        for name, limit in zip(("p50", "p95"), LATENCY_GOALS, strict=True):
            held = f[name] <= limit
            print(
                f"  end of speech -> first answer audio {name} <= {limit:.2f} s: "
                f"{f[name]:.3f} s, {'met' if held else 'NOT met'}"
            )
    if len(results) == 2:
        vad, semantic = results["vad"], results["semantic"]
        print(f"\nsemantic / vad p50 latency: {semantic['p50'] / vad['p50']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
