"""Soak: mixed REST and WebSocket load with abrupt client drops, then SIGTERM.

Run: `.venv/bin/python bench/soak.py [--duration 600] [--database sqlite|postgres]
[--redis URL] [--sockets 8] [--rest 3] [--json FILE]`.

It starts `parley serve` as its own process on a free loopback port (embedded SQLite by
default; `--database postgres` uses a fresh database on the PostgreSQL named by
PARLEY_TEST_DATABASE_URL, `--redis` a Redis) and loads it for `--duration` seconds:

- `--sockets` conversation clients, each in a loop, picking at random: reply then drop the
  TCP connection at the first audio chunk; a few audio frames then a drop; a whole reply
  then a clean close; "goodbye" (the agent ends the conversation); a drop before `config`;
- `--rest` REST clients: agents, conversations (list, read, create, end), session tokens
  (create, revoke), `/health`.

Every loop is bounded by the deadline and a count. During the run it samples the server's
RSS every 2 s. Then it stops the load and checks: no conversation left `live`; no 5xx
answer; no traceback in the server's log. Last, it opens live conversations, sends SIGTERM
and measures how long the process takes to exit, the close code each client got (1001
expected) and each conversation's status (`ended` expected).

It prints a report (and writes it as JSON with `--json`): counts, RSS at start, after
warm-up (the first fifth of the run) and at the end, and the RSS slope after warm-up in
MB per minute (least squares), which is what "flat" is judged by.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

SILENCE_20MS = base64.b64encode(bytes(640)).decode()  # pcm_16000, 20 ms
MAX_LOOPS = 100_000
"""No loop runs more often than this, whatever the duration."""


@dataclass
class Report:
    duration_s: float
    database: str
    redis: bool
    conversations: Counter[str] = field(default_factory=Counter)
    rest: Counter[str] = field(default_factory=Counter)
    server_errors: int = 0
    client_errors: list[str] = field(default_factory=list)
    rss_mb: list[tuple[float, float]] = field(default_factory=list)
    live_left: int = -1
    conversations_total: int = 0
    tracebacks_in_log: int = 0
    sigterm_exit_s: float = -1.0
    sigterm_close_codes: list[int] = field(default_factory=list)
    sigterm_statuses: list[str] = field(default_factory=list)

    def rss_slope_mb_per_min(self) -> float:
        """Least-squares slope of RSS after warm-up (the first fifth of the run)."""
        warm = [(t, m) for t, m in self.rss_mb if t >= self.duration_s / 5]
        if len(warm) < 3:
            return 0.0
        n = len(warm)
        mean_t = sum(t for t, _ in warm) / n
        mean_m = sum(m for _, m in warm) / n
        num = sum((t - mean_t) * (m - mean_m) for t, m in warm)
        den = sum((t - mean_t) ** 2 for t, _ in warm) or 1.0
        return num / den * 60

    def summary(self) -> dict[str, Any]:
        warm = [m for t, m in self.rss_mb if t >= self.duration_s / 5]
        plain = {name: getattr(self, name) for name in self.__dataclass_fields__}
        plain["conversations"] = dict(self.conversations)
        plain["rest"] = dict(self.rest)
        plain["client_errors"] = self.client_errors[:20]
        plain["client_error_count"] = len(self.client_errors)
        del plain["rss_mb"]
        return {
            **plain,
            "rss_start_mb": self.rss_mb[0][1] if self.rss_mb else None,
            "rss_after_warmup_mb": warm[0] if warm else None,
            "rss_end_mb": self.rss_mb[-1][1] if self.rss_mb else None,
            "rss_slope_mb_per_min": round(self.rss_slope_mb_per_min(), 3),
            "rss_samples": len(self.rss_mb),
            "rss_by_minute_mb": [m for t, m in self.rss_mb if int(t) % 60 < 2],
        }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Server:
    """`parley serve` in a temporary directory."""

    def __init__(self, variables: dict[str, str]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="parley-soak-"))
        self.port = free_port()
        self.log = self.dir / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env.update({"PARLEY_LOG_LEVEL": "warning", **variables})
        with self.log.open("w") as out:
            self.process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
                [sys.executable, "-m", "parley", "serve", "--port", str(self.port)],
                cwd=self.dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.http = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}/v1/sts/ws"

    def wait_ready(self) -> str:
        """Wait for /health; return the first API key it printed."""
        deadline = time.monotonic() + 120
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"parley serve exited:\n{self.log.read_text()[-3000:]}")
            try:
                status = httpx.get(f"{self.http}/health", timeout=1).status_code
            except httpx.HTTPError as error:  # not listening yet
                last = repr(error)
            else:
                if status == 200:
                    break
                last = f"/health answered {status}"
            time.sleep(0.2)
        else:
            raise SystemExit(f"parley serve did not answer /health in 120 s (last: {last})")
        for line in self.log.read_text().splitlines():
            if line.strip().startswith("parley_sk_"):
                return line.strip()
        raise SystemExit("no API key printed")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


async def receive(ws: ClientConnection, within: float = 10.0) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), within))
    return message


async def configure(ws: ClientConnection, agent: str) -> str:
    await ws.send(json.dumps({"type": "config", "agent": agent, "input_format": "pcm_16000"}))
    created = await receive(ws)
    if created.get("type") != "conversation_created":
        raise RuntimeError(f"config refused: {created}")
    await receive(ws)  # ready_to_start_conversation
    conversation_id: str = created["conversation_id"]
    return conversation_id


async def until(ws: ClientConnection, kind: str, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while (await receive(ws, max(0.1, deadline - time.monotonic())))["type"] != kind:
        pass


def drop(ws: ClientConnection) -> None:
    """Vanish: abort the TCP connection, no close frame."""
    ws.transport.abort()


async def one_conversation(server: Server, key: str, agent: str, report: Report) -> None:
    scenario = random.choice(["reply_drop", "audio_drop", "clean", "goodbye", "early_drop"])
    headers = {"Authorization": f"Bearer {key}"}
    try:
        ws = await connect(server.ws, additional_headers=headers, open_timeout=10)
    except (InvalidStatus, OSError, WebSocketException, TimeoutError) as error:
        report.client_errors.append(f"connect: {error!r}"[:200])
        return
    try:
        if scenario == "early_drop":
            drop(ws)
        else:
            await configure(ws, agent)
            if scenario == "reply_drop":
                await ws.send(json.dumps({"type": "generate_reply", "user_message": "Hello?"}))
                await until(ws, "audio_chunk")
                drop(ws)
            elif scenario == "audio_drop":
                for _ in range(random.randint(1, 20)):
                    await ws.send(json.dumps({"type": "audio_chunk", "audio": SILENCE_20MS}))
                drop(ws)
            elif scenario == "clean":
                await ws.send(json.dumps({"type": "say", "text": "Thanks for waiting."}))
                await until(ws, "assistant_finished_speaking")
                await ws.close()
            else:
                await ws.send(json.dumps({"type": "generate_reply", "user_message": "goodbye"}))
                await until(ws, "assistant_ended_conversation")
                await asyncio.wait_for(ws.wait_closed(), 10)
                if ws.close_code != 1000:
                    report.client_errors.append(f"goodbye closed {ws.close_code}")
        report.conversations[scenario] += 1
    except (ConnectionClosed, TimeoutError, RuntimeError, OSError) as error:
        report.client_errors.append(f"{scenario}: {error!r}"[:200])
        drop(ws)


async def socket_client(
    server: Server, key: str, agent: str, deadline: float, report: Report
) -> None:
    for _ in range(MAX_LOOPS):
        if time.monotonic() >= deadline:
            return
        await one_conversation(server, key, agent, report)


async def rest_client(api: httpx.AsyncClient, agent: str, deadline: float, report: Report) -> None:
    for _ in range(MAX_LOOPS):
        if time.monotonic() >= deadline:
            return
        action = random.choice(["list", "read", "create_end", "token", "agent", "health"])
        try:
            if action == "list":
                answers = [await api.get("/v1/conversations", params={"limit": 20})]
            elif action == "read":
                listed = await api.get("/v1/conversations", params={"limit": 5})
                answers = [listed]
                for item in listed.json().get("conversations", [])[:2]:
                    answers.append(await api.get(f"/v1/conversations/{item['id']}"))
            elif action == "create_end":
                made = await api.post("/v1/conversations", json={"agent": agent})
                answers = [made]
                if made.status_code == 201:
                    made_id = made.json()["conversation"]["id"]
                    answers.append(await api.post(f"/v1/conversations/{made_id}/end"))
            elif action == "token":
                made = await api.post("/v1/auth/session_token", json={"ttl_seconds": 60})
                answers = [made]
                if made.status_code == 200:
                    answers.append(await api.delete(f"/v1/auth/session_token/{made.json()['id']}"))
            elif action == "agent":
                name = f"soak-{secrets.token_hex(4)}"
                made = await api.post("/v1/agents", json={"name": name})
                answers = [made, await api.delete(f"/v1/agents/{name}")]
            else:
                answers = [await api.get("/health")]
        except httpx.HTTPError as error:
            report.client_errors.append(f"rest {action}: {error!r}"[:200])
            continue
        for answer in answers:
            report.rest[f"{action} {answer.status_code}"] += 1
            if answer.status_code >= 500:
                report.server_errors += 1
        await asyncio.sleep(0.01)


async def sample_rss(pid: int, started: float, deadline: float, report: Report) -> None:
    while time.monotonic() < deadline:
        report.rss_mb.append((round(time.monotonic() - started, 1), round(rss_mb(pid), 1)))
        await asyncio.sleep(2)


async def count_live(api: httpx.AsyncClient) -> tuple[int, int]:
    """Page through every conversation: (how many are live, how many there are)."""
    live = total = 0
    cursor = None
    for _ in range(MAX_LOOPS):
        params: dict[str, Any] = {"limit": 100}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/v1/conversations", params=params)).json()
        for item in page["conversations"]:
            total += 1
            live += item["status"] == "live"
        cursor = page.get("next_cursor")
        if not cursor:
            break
    return live, total


async def sigterm_phase(server: Server, key: str, agent: str, report: Report) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    opened = []
    for _ in range(4):
        ws = await connect(server.ws, additional_headers=headers)
        opened.append((ws, await configure(ws, agent)))
    await opened[0][0].send(json.dumps({"type": "say", "text": "A long sentence " * 20}))

    async def close_code(ws: ClientConnection) -> int:
        try:
            while True:
                await receive(ws, 30)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else -1
        except TimeoutError:
            return -2

    closing = [asyncio.create_task(close_code(ws)) for ws, _ in opened]
    await asyncio.sleep(0.2)
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(server.process.wait, 30)
    report.sigterm_exit_s = round(time.monotonic() - started, 2)
    report.sigterm_close_codes = list(await asyncio.gather(*closing))
    # The process is gone: read the statuses from the database itself.
    ids = [conversation_id for _, conversation_id in opened]
    report.sigterm_statuses = await read_statuses(server, ids)


async def read_statuses(server: Server, ids: list[str]) -> list[str]:
    url = server_variables.get("PARLEY_DATABASE_URL")
    if url is None:
        with sqlite3.connect(server.dir / "parley.db") as db:
            return [
                db.execute("SELECT status FROM conversations WHERE id = ?", (i,)).fetchone()[0]
                for i in ids
            ]
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        return [
            await connection.fetchval("SELECT status FROM conversations WHERE id = $1", i)
            for i in ids
        ]
    finally:
        await connection.close()


server_variables: dict[str, str] = {}


async def soak(args: argparse.Namespace) -> Report:
    report = Report(duration_s=args.duration, database=args.database, redis=bool(args.redis))
    server_variables.update({"PARLEY_STT": args.stt})
    if args.database == "postgres":
        server_variables["PARLEY_DATABASE_URL"] = await fresh_postgres()
    if args.redis:
        server_variables["PARLEY_REDIS_URL"] = args.redis
    server = Server(server_variables)
    try:
        key = server.wait_ready()
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=server.http, headers=headers, timeout=30) as api:
            agent = "soak"
            made = await api.post("/v1/agents", json={"name": agent, "welcome_message": None})
            assert made.status_code == 201, made.text
            started = time.monotonic()
            deadline = started + args.duration
            await asyncio.gather(
                sample_rss(server.process.pid, started, deadline, report),
                *(socket_client(server, key, agent, deadline, report) for _ in range(args.sockets)),
                *(rest_client(api, agent, deadline, report) for _ in range(args.rest)),
            )
            await asyncio.sleep(1.0)  # the last drops reach the server
            report.live_left, report.conversations_total = await count_live(api)
        await sigterm_phase(server, key, agent, report)
        log = server.log.read_text()
        report.tracebacks_in_log = log.count("Traceback")
    finally:
        server.stop()
    return report


async def fresh_postgres() -> str:
    import asyncpg  # only for --database postgres

    admin = os.environ.get("PARLEY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
    name = f"parley_soak_{secrets.token_hex(4)}"
    connection = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return admin.rsplit("/", 1)[0] + f"/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load")
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--redis", default=None, help="a Redis URL (distributed mode)")
    parser.add_argument("--sockets", type=int, default=8, help="conversation clients")
    parser.add_argument("--rest", type=int, default=3, help="REST clients")
    parser.add_argument("--stt", choices=["none", "whisper"], default="none")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    report = asyncio.run(soak(args))
    summary = report.summary()
    print(json.dumps(summary, indent=2, default=str))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, default=str))


if __name__ == "__main__":
    main()
