"""Webhooks: delivery lag from commit to receipt, and the request path with webhooks on and
off (issue #20 goals: lag p50 <= 50 ms, p99 <= 250 ms over 1,000 events; throughput with
webhooks on within 10 % of off, in the same run).

Run (from the repository root):

    .venv/bin/python bench/webhooks.py [--events 1000] [--concurrency 8] [--rounds 2]
        [--database sqlite|postgres] [--json FILE] [--profile DIR]

One `parley serve` process (1 worker, PARLEY_STT=none, outbound http and loopback allowed)
on a free loopback port, on embedded SQLite, or with `--database postgres` on a fresh
database of the server of PARLEY_TEST_DATABASE_URL (dropped afterwards). A receiver runs as
a process of its own (a minimal asyncio HTTP server answering 204) and notes the wall time
each delivery arrives.

The request path is `POST /v1/agents` (one committed change, one `agent.created` event),
`--events` requests a phase at `--concurrency` in flight. Phases alternate, `--rounds`
times: webhooks off (no webhook), then on (one webhook receiving agent.created). For each
"on" phase, the lag of each event is its receipt time minus its `created_at` (the time the
event was written, in the transaction, just before the commit; both clocks are this
machine's). It prints each phase's requests per second, the ratio on/off, the lag p50,
p99 and maximum over every event of the "on" phases, and the CPU time per request of the
serving process and of its webhook sender (the process beside it that sends). `--profile
DIR` records both with py-spy in each phase and prints the summaries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import profile_summary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def receive(port: int, out: Path) -> None:
    """The receiver process: note `<receipt time> <body>` per delivery, answer 204.

    A minimal asyncio HTTP/1.1 server (requests with Content-Length, as Parley sends), so
    that the receiver, on the same machine, takes as little CPU from the server as it can.
    """
    sink = out.open("a", buffering=1)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                arrived = time.time()
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                sink.write(f"{arrived:.6f} {body.decode()}\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


class Serve:
    """`python -m parley serve` in a temporary directory."""

    def __init__(self, cwd: Path, database_url: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env |= {
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_STT": "none",
            "PARLEY_LOG_LEVEL": "warning",
            "PARLEY_OUTBOUND_ALLOW_HTTP": "true",
            "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS": "true",
        }
        self.log = cwd / "serve.log"
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-m", "parley", "serve", "--port", str(self.port)],
            cwd=cwd,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        self.key = ""

    def wait_ready(self) -> None:
        for _ in range(900):
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(self.log.read_text()[-2000:])
        keys = [line.strip() for line in self.log.read_text().splitlines()]
        self.key = next(line for line in keys if line.startswith("parley_sk_"))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def sender_pid(serve_pid: int) -> int:
    """The webhook sender that `parley serve` runs beside it (a child process)."""
    for _ in range(100):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == serve_pid and b"webhook-sender" in cmdline:
                return int(entry.name)
        time.sleep(0.1)
    raise RuntimeError("parley serve runs no webhook sender")


@contextlib.contextmanager
def profiled(profile: Path | None, name: str, pids: dict[str, int]) -> Iterator[None]:
    """With --profile, py-spy records each of `pids` while the block runs (raw stacks in
    `profile`/`name`-`who`.txt, summarized at the end by bench/profile_summary.py)."""
    if profile is None:
        yield
        return
    spy = str(Path(sys.executable).parent / "py-spy")
    recorders = [
        subprocess.Popen(  # noqa: S603 - fixed arguments
            [
                spy,
                "record",
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                str(profile / f"{name}-{who}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for who, pid in pids.items()
    ]
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)  # py-spy writes what it recorded
            recorder.wait(60)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def phase(client: httpx.AsyncClient, events: int, concurrency: int) -> float:
    """Create `events` agents, `concurrency` at a time; return requests per second."""
    names = iter(f"bench-{secrets.token_hex(6)}" for _ in range(events))

    async def worker() -> None:
        for name in names:
            answer = await client.post("/v1/agents", json={"name": name})
            if answer.status_code != 201:
                raise RuntimeError(answer.text)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return events / (time.perf_counter() - started)


def lags_ms(received: Path, expected: int, deadline_s: float = 60) -> list[float]:
    """Wait for `expected` deliveries; return each one's lag in milliseconds."""
    lines: list[str] = []
    for _ in range(int(deadline_s * 10)):
        lines = received.read_text().splitlines()
        if len(lines) >= expected:
            break
        time.sleep(0.1)
    lags = []
    for line in lines:
        arrived, body = line.split(" ", 1)
        written = datetime.fromisoformat(json.loads(body)["created_at"].replace("Z", "+00:00"))
        lags.append((float(arrived) - written.timestamp()) * 1000)
    return lags


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace, cwd: Path, database_url: str) -> dict[str, Any]:
    received = cwd / "received.txt"
    received.touch()
    receiver_port = free_port()
    receiver = subprocess.Popen(  # noqa: S603, ASYNC220 - this interpreter; before any load
        [sys.executable, __file__, "--receive", str(receiver_port), str(received)]
    )
    serve = Serve(cwd, database_url)
    try:
        serve.wait_ready()
        headers = {"Authorization": f"Bearer {serve.key}"}
        base = f"http://127.0.0.1:{serve.port}"
        limits = httpx.Limits(max_connections=args.concurrency)
        async with httpx.AsyncClient(
            base_url=base, headers=headers, timeout=30, limits=limits
        ) as client:
            await phase(client, 50, args.concurrency)  # warm-up
            off: list[float] = []
            on: list[float] = []
            delivered = 0
            cpu_off: list[float] = []
            cpu_on: list[float] = []
            sender_off: list[float] = []
            sender_on: list[float] = []
            pid = serve.process.pid
            sender = sender_pid(pid)
            for _ in range(args.rounds):
                before, sender_before = cpu_seconds(pid), cpu_seconds(sender)
                with profiled(args.profile, "off", {"serve": pid, "sender": sender}):
                    off.append(await phase(client, args.events, args.concurrency))
                cpu_off.append((cpu_seconds(pid) - before) * 1000 / args.events)
                sender_off.append((cpu_seconds(sender) - sender_before) * 1000 / args.events)
                made = await client.post(
                    "/v1/webhooks",
                    json={
                        "url": f"http://127.0.0.1:{receiver_port}/hook",
                        "event_types": ["agent.created"],
                    },
                )
                made.raise_for_status()
                before, sender_before = cpu_seconds(pid), cpu_seconds(sender)
                with profiled(args.profile, "on", {"serve": pid, "sender": sender}):
                    on.append(await phase(client, args.events, args.concurrency))
                cpu_on.append((cpu_seconds(pid) - before) * 1000 / args.events)
                delivered += args.events
                lags = lags_ms(received, delivered)
                sender_on.append((cpu_seconds(sender) - sender_before) * 1000 / args.events)
                await client.delete(f"/v1/webhooks/{made.json()['webhook']['id']}")
    finally:
        serve.stop()
        receiver.terminate()
        receiver.wait(10)
    return {
        "database": args.database,
        "events_per_phase": args.events,
        "concurrency": args.concurrency,
        "requests_per_s_off": [round(x, 1) for x in off],
        "requests_per_s_on": [round(x, 1) for x in on],
        "on_over_off": round(statistics.mean(on) / statistics.mean(off), 3),
        "serve_cpu_ms_per_request_off": [round(x, 2) for x in cpu_off],
        "serve_cpu_ms_per_request_on": [round(x, 2) for x in cpu_on],
        "sender_cpu_ms_per_request_off": [round(x, 2) for x in sender_off],
        "sender_cpu_ms_per_request_on": [round(x, 2) for x in sender_on],
        "delivered": len(lags),
        "lag_ms_p50": round(percentile(lags, 0.50), 1),
        "lag_ms_p99": round(percentile(lags, 0.99), 1),
        "lag_ms_max": round(max(lags), 1),
    }


def postgres_database() -> tuple[str, str]:
    """Create a fresh database on PARLEY_TEST_DATABASE_URL's server; return (url, name)."""
    admin = os.environ["PARLEY_TEST_DATABASE_URL"]
    name = f"parley_bench_{secrets.token_hex(4)}"
    asyncio.run(_admin(admin, f'CREATE DATABASE "{name}"'))
    return admin.rsplit("/", 1)[0] + f"/{name}", name


def drop_postgres(name: str) -> None:
    admin = os.environ["PARLEY_TEST_DATABASE_URL"]
    asyncio.run(_admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _admin(url: str, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--receive":
        receive(int(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", type=Path, help="py-spy each phase into this folder")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as directory:
        cwd = Path(directory)
        dropped = None
        database_url = "sqlite:///parley.db"
        if args.database == "postgres":
            database_url, dropped = postgres_database()
        try:
            result = asyncio.run(run(args, cwd, database_url))
        finally:
            if dropped:
                drop_postgres(dropped)
    for name, value in result.items():
        print(f"{name:>20}: {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.profile:
        for raw in sorted(args.profile.glob("*.txt")):
            print(f"\nprofile {raw.name}:")
            print("\n".join("  " + line for line in profile_summary.summarize(raw).lines()))


if __name__ == "__main__":
    main()
