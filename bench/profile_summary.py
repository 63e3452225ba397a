"""Top functions of a py-spy raw profile (`py-spy record --format raw`).

Own time: the samples whose innermost Python frame is that line of the function (the event
loop's own frames, such as `Runner.run`, stand for time in uvloop's C code: polling and
callbacks; a thread blocked in C, as aiosqlite's on its queue, is not always seen as idle).
Total time: the samples with the function anywhere on the stack, leaving out start-up and
event-loop frames that are on nearly every stack (runpy, typer, uvicorn's server, asyncio's
runner, threading's bootstrap); then the same for Parley's own functions only. The share of
samples outside the event-loop thread is counted too (aiosqlite runs each SQLite connection
in a thread of its own).

Run alone: `python bench/profile_summary.py FILE [--top 15]`.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

INFRASTRUCTURE = (
    "<frozen runpy>",
    "typer/",
    "click/",
    "parley/__main__.py",
    "parley/cli/",
    "threading.py",
    "uvicorn/_compat.py",
    "uvicorn/main.py",
    "uvicorn/server.py",
    "asyncio/runners.py",
    "asyncio/base_events.py",
    "asyncio/events.py",
)
_PATH = re.compile(r"\(([^()]*?)(?::\d+)?\)$")
_LINE = re.compile(r":\d+\)$")


@dataclass
class Summary:
    samples: int
    other_threads: int
    own: list[tuple[str, int]]
    total: list[tuple[str, int]]
    parley: list[tuple[str, int]]

    def lines(self) -> list[str]:
        share = max(self.samples, 1)
        out = [
            f"{self.samples} samples; outside the event-loop thread: "
            f"{100 * self.other_threads / share:.1f}%"
        ]
        for title, rows in (
            ("own time (by line)", self.own),
            ("total time", self.total),
            ("total time, Parley's functions", self.parley),
        ):
            out.append(f"top by {title}:")
            out += [f"  {100 * n / share:5.1f}%  {frame}" for frame, n in rows]
        return out


def _infrastructure(frame: str) -> bool:
    found = _PATH.search(frame)
    return found is None or any(found.group(1).startswith(p) for p in INFRASTRUCTURE)


def summarize(raw: Path, top: int = 15) -> Summary:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = other_threads = 0
    for line in raw.read_text().splitlines():
        stack, _, weight = line.rpartition(" ")
        if not stack or not weight.isdigit():
            continue
        count = int(weight)
        frames = [f for f in stack.split(";") if not f.startswith("process ")]
        samples += count
        other_threads += count * any("Thread._bootstrap " in f for f in frames)
        own[frames[-1] if frames else "(no Python frame)"] += count
        for function in {_LINE.sub(")", f) for f in frames if not _infrastructure(f)}:
            total[function] += count
    parley = Counter({f: n for f, n in total.items() if "(parley/" in f})
    return Summary(
        samples,
        other_threads,
        own.most_common(top),
        total.most_common(top),
        parley.most_common(top),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print("\n".join(summarize(args.raw, args.top).lines()))


if __name__ == "__main__":
    main()
