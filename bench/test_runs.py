"""Agent test runs (API.md section 19; issue #43's goals): 20 scripted scenarios of 3 caller
lines each complete in at most 1.5x the run's total caller audio time divided by the
concurrency (4), and the same run gives the same pass/fail for every scenario each time.

Run: `.venv/bin/python bench/test_runs.py [--repeats 10] [--scenarios 20]`.

It starts `parley serve` (embedded mode, an empty directory, the real recognizer, the
rule-based replies: no language model), makes an agent with no welcome message and
`--scenarios` scenarios of three lines each, half expecting what the agent says (they
should pass) and half expecting what it never says (they should fail), and runs them all
`--repeats` times, one run after the other. For each run it prints the run's time (the
server's `started_at` to `ended_at`), the caller audio time of its lines (each line rendered
by Parley's synthesizer in the caller's voice, as the runner renders it) divided by 4, and
the ratio of the two (the goal: at most 1.5); then whether every scenario had the same
outcome in every run (the goal: no flake), naming any that did not.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' serve process

from tests.faults.serve_process import ServeProcess

from parley.engine import AudioFormat, load_synthesizer
from parley.services.scenario_caller import Speech, caller_voice
from parley.services.scenario_runner import MAX_AT_ONCE

AGENT = {"name": "bistro", "welcome_message": None,
         "system_prompt": "You are the booking line of the Blue Door bistro."}  # fmt: skip
LINES = [
    ["Hello, I would like a table.", "For two people tonight.", "At seven, please."],
    ["Do you have a table on Friday?", "We are four people.", "Near the window if you can."],
    ["Can I change my booking?", "It is under the name Martin.", "Make it eight o'clock."],
    ["Are you open on Sunday?", "What time do you close?", "Thank you for the help."],
    ["I need to cancel a table.", "It was for tomorrow night.", "Sorry for the trouble."],
]
GOAL_RATIO = 1.5
STAGES = ("endpointing_ms", "transcription_ms", "model_first_token_ms", "speech_first_audio_ms")
"""A reply's stages (API.md section 18), each from the end of the caller's speech."""


def scenarios(count: int) -> list[dict[str, Any]]:
    """`count` scenarios of three lines; even ones expect the agent's words, odd ones not."""
    made = []
    for index in range(count):
        lines = LINES[index % len(LINES)]
        passing = index % 2 == 0
        expect: dict[str, Any] = {"ended_by": ["user"]}
        if passing:
            expect["transcript_contains"] = ["You said", "Blue Door"]
        else:
            expect["transcript_contains"] = ["a phrase the rule-based agent never says"]
        made.append(
            {"name": f"scenario-{index:02d}", "agent": AGENT["name"],
             "caller": {"lines": lines}, "expect": expect}
        )  # fmt: skip
    return made


async def audio_seconds(made: list[dict[str, Any]]) -> float:
    """The caller audio of every line, rendered as the runner renders it (pcm_16000)."""
    synthesizer = load_synthesizer()
    voice = caller_voice(synthesizer, synthesizer.default_voice)
    speech = Speech(synthesizer, voice=voice, output_format=AudioFormat.PCM_16000)
    total = 0
    for scenario in made:
        for line in scenario["caller"]["lines"]:
            total += len(await speech.render(line))
    return total / 2 / 16_000


def run_once(
    http: httpx.Client, latencies: list[int], stages: dict[str, list[int]]
) -> tuple[float, float, dict[str, bool]]:
    """Queue a run of every scenario and wait: (server seconds, wall seconds, outcomes);
    add each reply's latency (end of the caller's speech to the first audio) to
    `latencies`, and its stages' times to `stages`."""
    started = time.perf_counter()
    queued = http.post("/v1/projects/main/test_runs", json={})
    queued.raise_for_status()
    run_id = queued.json()["test_run"]["id"]
    while True:
        run = http.get(f"/v1/test_runs/{run_id}").json()["test_run"]
        if run["status"] not in ("queued", "running"):
            break
        time.sleep(0.2)
    wall = time.perf_counter() - started
    served = (
        datetime.fromisoformat(run["ended_at"]) - datetime.fromisoformat(run["started_at"])
    ).total_seconds()
    latencies.extend(ms for result in run["results"] for ms in result["latencies_ms"] or ())
    for result in run["results"]:
        found = http.get(f"/v1/conversations/{result['conversation_id']}").json()
        for turn in found["conversation"]["analysis"]["turns"]:
            for stage in STAGES:
                stages.setdefault(stage, []).append(turn[stage])
    return served, wall, {result["scenario"]: result["passed"] for result in run["results"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--scenarios", type=int, default=20)
    args = parser.parse_args()
    made = scenarios(args.scenarios)
    audio = asyncio.run(audio_seconds(made))
    budget = audio / MAX_AT_ONCE
    goal = GOAL_RATIO * budget
    print(f"{len(made)} scenarios, 3 lines each: {audio:.1f} s of caller audio; "
          f"/ {MAX_AT_ONCE} = {budget:.1f} s; goal: a run in <= {goal:.1f} s")  # fmt: skip
    designed = {body["name"]: index % 2 == 0 for index, body in enumerate(made)}
    outcomes: list[dict[str, bool]] = []
    times: list[float] = []
    latencies: list[int] = []
    stages: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as directory:
        server = ServeProcess(Path(directory), PARLEY_STT="whisper")
        server.start()
        try:
            headers = {"Authorization": f"Bearer {server.first_key}"}
            with httpx.Client(base_url=server.http, headers=headers, timeout=60) as http:
                http.post("/v1/agents", json=AGENT).raise_for_status()
                for body in made:
                    http.post("/v1/projects/main/test_scenarios", json=body).raise_for_status()
                heading = f"{'run':>4} {'run s':>7} {'wall s':>7} {'ratio':>6} {'passed':>7}"
                print(f"{heading}  not as designed")
                for index in range(args.repeats):
                    served, wall, outcome = run_once(http, latencies, stages)
                    times.append(served)
                    outcomes.append(outcome)
                    passed = f"{sum(outcome.values())}/{len(outcome)}"
                    odd = [n for n, want in designed.items() if outcome.get(n) != want]
                    print(f"{index + 1:>4} {served:>7.1f} {wall:>7.1f} {served / budget:>6.2f} "
                          f"{passed:>7}  {', '.join(odd) or '-'}", flush=True)  # fmt: skip
        finally:
            server.ensure_stopped()
    median, longest = statistics.median(times), max(times)
    if latencies:
        cuts = statistics.quantiles(latencies, n=20)
        print(f"replies: {len(latencies)}, end of speech to first audio p50 "
              f"{statistics.median(latencies):.0f} ms, p95 {cuts[18]:.0f} ms")  # fmt: skip
        print("  stages, p50 ms: " + ", ".join(
            f"{stage} {statistics.median(values):.0f}" for stage, values in stages.items()
        ))  # fmt: skip
    print(f"median run {median:.1f} s, max {longest:.1f} s: median ratio "
          f"{median / budget:.2f}, max {longest / budget:.2f} (goal <= {GOAL_RATIO})")  # fmt: skip
    flaky = sorted(
        name for name in outcomes[0] if len({outcome.get(name) for outcome in outcomes}) > 1
    )
    unexpected = sorted(name for name in designed if outcomes[0].get(name) != designed[name])
    print(f"same pass/fail in all {len(outcomes)} runs: {'yes' if not flaky else 'no'}"
          + (f" (differed: {', '.join(flaky)})" if flaky else ""))  # fmt: skip
    print("outcomes as designed (even pass, odd fail): "
          + ("yes" if not unexpected else f"no ({', '.join(unexpected)})"))  # fmt: skip


if __name__ == "__main__":
    main()
