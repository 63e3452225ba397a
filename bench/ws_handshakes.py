"""WebSocket handshakes per second, for bench/http_load.py (wrk cannot open WebSockets).

`measure(urls, connections, duration)` runs `connections` clients side by side for
`duration` seconds; each opens a WebSocket, then closes it (no message sent), over and over.
It times the handshake only (from the TCP connect to the 101 answer) and returns the count
per second, p50 and p99, the refused handshakes by status and the client's CPU share.
`urls` yields the URL of each handshake, so each can carry a fresh credential.

Run alone: `python bench/ws_handshakes.py ws://127.0.0.1:8000/ [--connections 32]
[--duration 8]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import uvloop
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

OPEN_TIMEOUT_S = 10.0


@dataclass
class Handshakes:
    duration_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)
    client_cpu: float = 0.0
    """CPU seconds of this process per second of wall time (1.0: one core busy)."""

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_s)

        def percentile(share: float) -> float:
            if not ordered:
                return float("nan")
            return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000

        return {
            "requests": len(ordered),
            "rps": len(ordered) / self.duration_s if self.duration_s else 0.0,
            "p50_ms": percentile(0.50),
            "p99_ms": percentile(0.99),
            "statuses": {"101": len(ordered), **self.refused},
            "non_2xx": sum(self.refused.values()),
            "client_cpu": round(self.client_cpu, 2),
        }


async def _client(urls: Iterator[str], deadline: float, result: Handshakes) -> None:
    while time.monotonic() < deadline:
        url = next(urls)
        started = time.perf_counter()
        try:
            socket = await connect(url, open_timeout=OPEN_TIMEOUT_S)
        except InvalidStatus as refused:
            result.refused[str(refused.response.status_code)] += 1
            continue
        except (OSError, TimeoutError, WebSocketException) as error:
            result.refused[type(error).__name__] += 1
            continue
        result.latencies_s.append(time.perf_counter() - started)
        try:
            await socket.close()
        except (OSError, WebSocketException):
            result.refused["close failed"] += 1


async def _measure(urls: Iterator[str], connections: int, duration: float) -> Handshakes:
    result = Handshakes()
    cpu_before = _cpu_seconds()
    started = time.monotonic()
    deadline = started + duration
    await asyncio.gather(*(_client(urls, deadline, result) for _ in range(connections)))
    result.duration_s = time.monotonic() - started
    result.client_cpu = (_cpu_seconds() - cpu_before) / result.duration_s
    return result


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(urls: Iterator[str], connections: int, duration: float) -> dict[str, Any]:
    """Open and close WebSockets for `duration` s with `connections` clients; summarize."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(_measure(urls, connections, duration)).summary()


def probe(url: str) -> str | None:
    """Open and close one WebSocket: None when the handshake succeeds, else why it failed."""

    async def once() -> str | None:
        try:
            socket = await connect(url, open_timeout=OPEN_TIMEOUT_S)
        except InvalidStatus as refused:
            body = refused.response.body or b""
            return f"handshake answered {refused.response.status_code}: {body[:300]!r}"
        except (OSError, TimeoutError, WebSocketException) as error:
            return f"handshake failed: {error!r}"
        await socket.close()
        return None

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(once())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=float, default=8.0)
    args = parser.parse_args()

    def same() -> Iterator[str]:
        while True:
            yield args.url

    print(json.dumps(measure(same(), args.connections, args.duration)))


if __name__ == "__main__":
    main()
