"""The retention sweep on PostgreSQL: 10,000 due conversations, and the request path meanwhile.

Run: `.venv/bin/python bench/retention_sweep.py [--conversations 10000] [--clients 8]`
(PARLEY_TEST_DATABASE_URL names the PostgreSQL server; a fresh `parley_bench_<hex>`
database is created there and dropped afterwards).

It starts `parley serve` on that database (recordings in a temporary directory), creates an
agent, and writes N ended conversations straight into the database, each with two items
and a recording file, both due for deletion `--due-in` seconds later (issue #40's goal: a
sweep of 10,000 due conversations in at most 60 s, without blocking the request path).
Meanwhile `--clients` clients read the agent (`GET /v1/agents/bench`, an API key) in a
loop: their throughput and p50/p99 latency are printed for the time before anything is due
(the peer, same run, same process) and for the time the sweep runs, with the ratios. The
sweep's time is from the moment the rows are due until none is left (the server's timer
looks every 5 s, so up to 5 s of it is waiting for the next tick), and from the first
deletion seen to the last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.voice_turn import count_recordings, percentile, start_server

ADMIN_URL = os.environ.get("PARLEY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def create_database() -> str:
    name = f"parley_bench_{secrets.token_hex(4)}"
    connection = await asyncpg.connect(ADMIN_URL)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


async def drop_database(url: str) -> None:
    connection = await asyncpg.connect(ADMIN_URL)
    try:
        name = url.rsplit("/", 1)[1]
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await connection.close()


async def seed(
    database_url: str, recordings: Path, count: int, due_at: datetime
) -> tuple[str, str]:
    """Write `count` ended conversations due at `due_at`, two items and a file each."""
    connection = await asyncpg.connect(database_url)
    try:
        org_id, agent_id, project_id, project_name = await connection.fetchrow(
            "SELECT a.org_id, a.id, a.project_id, p.name FROM agents a "
            "JOIN projects p ON p.id = a.project_id WHERE a.name = 'bench'"
        )
        ended = due_at - timedelta(hours=1)
        retention = json.dumps(
            {
                "zero_data_retention": False,
                "transcripts": {"delete_after_hours": 1},
                "audio_recordings": {"delete_after_hours": 1},
            }
        )
        ids = [f"sweep-{n:06d}" for n in range(count)]
        (recordings / org_id).mkdir(parents=True, exist_ok=True)
        for conversation_id in ids:
            (recordings / org_id / f"{conversation_id}.wav").write_bytes(b"RIFF" + bytes(4096))
        await connection.executemany(
            "INSERT INTO conversations (org_id, id, agent_id, project_id, project_name, status, "
            "started_at, ended_at, created_at, ended_by, template_variables, latencies_ms, "
            "interruptions_count, retention, transcripts_due_at, audio_due_at, recording_key, "
            "recorded_at) VALUES ($1, $2, $3, $4, $5, 'ended', $6, $7, $6, 'user', '{}', '[]', "
            "0, $8, $9, $9, $10, $7)",
            [
                (
                    org_id,
                    conversation_id,
                    agent_id,
                    project_id,
                    project_name,
                    ended - timedelta(minutes=2),
                    ended,
                    retention,
                    due_at,
                    f"{org_id}/{conversation_id}.wav",
                )
                for conversation_id in ids
            ],
        )
        await connection.executemany(
            "INSERT INTO conversation_items (org_id, conversation_id, role, text, tool_calls, "
            "created_at) VALUES ($1, $2, $3, $4, '[]', $5)",
            [
                (org_id, conversation_id, role, text, ended)
                for conversation_id in ids
                for role, text in (("user", "My order is late."), ("assistant", "Sorry."))
            ],
        )
    finally:
        await connection.close()
    return org_id, agent_id


async def remaining(database_url: str) -> int:
    connection = await asyncpg.connect(database_url)
    try:
        return int(
            await connection.fetchval(
                "SELECT count(*) FROM conversations WHERE transcripts_deleted_at IS NULL "
                "AND transcripts_due_at IS NOT NULL"
            )
        )
    finally:
        await connection.close()


async def read_agent(
    base: str, key: str, stop: asyncio.Event, samples: list[tuple[float, float]]
) -> None:
    """Read the agent until `stop`: (when it was answered, how long it took)."""
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        while not stop.is_set():
            started = time.monotonic()
            answer = await http.get("/v1/agents/bench")
            answer.raise_for_status()
            samples.append((time.monotonic(), time.monotonic() - started))


def figures(
    samples: list[tuple[float, float]], start: float, end: float
) -> tuple[float, float, float]:
    """Requests per second, p50 and p99 latency (ms) of the answers between two moments."""
    inside = [took for at, took in samples if start <= at < end]
    return len(inside) / (end - start), percentile(inside, 50) * 1000, percentile(inside, 99) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--due-in", type=float, default=15.0)
    args = parser.parse_args()
    database_url = await create_database()
    try:
        with tempfile.TemporaryDirectory() as directory:
            recordings = Path(directory, "recordings")
            process, base, key, _log = start_server(
                Path(directory),
                {
                    "PARLEY_DATABASE_URL": database_url,
                    "PARLEY_RECORDINGS_DIR": str(recordings),
                    "PARLEY_STT": "none",
                },
            )
            try:
                async with httpx.AsyncClient(base_url=base) as http:
                    made = await http.post(
                        "/v1/agents",
                        headers={"Authorization": f"Bearer {key}"},
                        json={"name": "bench"},
                    )
                made.raise_for_status()
                due_at = datetime.now(UTC) + timedelta(seconds=args.due_in)
                await seed(database_url, recordings, args.conversations, due_at)
                stop = asyncio.Event()
                samples: list[tuple[float, float]] = []
                readers = [
                    asyncio.create_task(read_agent(base, key, stop, samples))
                    for _ in range(args.clients)
                ]
                loop_due = time.monotonic() + (due_at - datetime.now(UTC)).total_seconds()
                await asyncio.sleep(max(0.0, loop_due - time.monotonic()))
                first_seen = None
                while (left := await remaining(database_url)) > 0:
                    if first_seen is None and left < args.conversations:
                        first_seen = time.monotonic()
                    await asyncio.sleep(0.2)
                done = time.monotonic()
                stop.set()
                await asyncio.gather(*readers)
                files = count_recordings(recordings)
            finally:
                process.terminate()
                process.wait(timeout=15)
    finally:
        await drop_database(database_url)
    warm = samples[0][0] + 2.0
    before = figures(samples, warm, loop_due)
    during = figures(samples, first_seen or loop_due, done)
    print(f"{args.conversations} due conversations on PostgreSQL; {files} recording files left")
    print(
        f"sweep: {done - loop_due:.1f} s from due to none left (goal <= 60 s); "
        f"{done - (first_seen or loop_due):.1f} s from the first deletion seen"
    )
    print(f"agent reads before: {before[0]:.0f}/s, p50 {before[1]:.1f} ms, p99 {before[2]:.1f} ms")
    print(f"agent reads during: {during[0]:.0f}/s, p50 {during[1]:.1f} ms, p99 {during[2]:.1f} ms")
    print(
        f"ratios during/before: throughput x{during[0] / before[0]:.2f}, "
        f"p99 x{during[2] / before[2]:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
