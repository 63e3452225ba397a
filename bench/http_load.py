"""HTTP load: Parley's request path under wrk, beside naive FastAPI peers (issue #11).

Run (from the repository root, with Parley installed in the interpreter that runs this):

    scripts/install-wrk            # Debian's wrk, when it is missing
    .venv/bin/python bench/http_load.py [--duration 8] [--connections 32]
        [--modes sqlite,postgres1,postgres2] [--only ROW ...] [--json FILE]
        [--profile DIR] [--workspace-limits]

One run starts every server as its own process on a free loopback port, one after another,
loads it with `wrk` (2 threads, 32 connections, 8 s a row, after a 1 s warm-up) and stops it:

- peers (bench/peer_*.py, uvicorn, 1 worker, uvloop + httptools, no access log):
  `peer-naive` FastAPI verifying Parley's EdDSA JWT with PyJWT in an `HTTPBearer` dependency,
  no database; `peer-db` the same plus one indexed SQLAlchemy read (aiosqlite), the
  one-read peer: the reference of every read row; `peer-write` FastAPI with a dict-looked-up
  API key and one `UPDATE` in a committed transaction, the one-write peer: the reference of
  `agent-disable`; `peer-health` a bare FastAPI `/health` (the reference of the `health`
  rows); `peer-ws` a bare uvicorn WebSocket endpoint (the reference of `ws-*`);
- Parley (`python -m parley serve`) in each mode: `sqlite` (embedded SQLite, in-process
  stores, 1 worker), `postgres1` and `postgres2` (a fresh `parley_bench_<hex>` database on
  the server of PARLEY_TEST_DATABASE_URL, dropped afterwards, and Redis db 14, flushed
  before each mode and after it; 1 and 2 workers). In each PostgreSQL mode `peer-db` and
  `peer-write` run again on that database (asyncpg), with as many workers, and are that
  mode's references. Every mode gets PARLEY_PUBLIC_URL https://parley.bench (JWT audience
  `parley.bench`), PARLEY_STT=none and the JWT rate limit raised out of the way
  (PARLEY_JWT_RATE_PER_MINUTE and _BURST 1,000,000); everything else is Parley's default
  (log level info: one access-log line a request, to a file).

Parley rows: `conversation-jwt` GET /v1/conversations/{id} with one JWT without `jti`;
`conversation-jwt-jti` the same, each request with its own pre-minted JWT and `jti`;
`agent` GET /v1/agents/{name} with an API key; `agents` GET /v1/agents with an API key;
`agent-disable` POST /v1/agents/{name}/disable with an API key; `health` GET /health;
`agent-after-writes` the `agent` row measured right after a write burst: `--duration` seconds
of fresh-`jti` JWT reads (a `jti` claim committed per request, unmeasured; their rate is
in the row's note), then at once, with no warm-up between, the agent reads (issue #38 item
11: a read right after a burst of writes waited 0.2 s at the tail); `agent-after-disables`
the same after a burst of `agent-disable` (audited writes, each moving the organization's
generation: the read model refills after them);
`ws-jwt` WebSocket handshakes (open, then close without `config`), each with its own JWT
and `jti`, and `ws-session` the same with one session token, measured by
bench/ws_handshakes.py.

With `--workspace-limits`, Parley's tenant gets a non-empty IP allowlist (ten entries, the
load generator's 127.0.0.1 last) and caps on active conversations for the workspace and
`main` (API.md section 17) before its rows run: the API-key rows then pay the allowlist's
check, the JWT rows must pay nothing.

Before a row is measured, one request must answer 2xx (101 for WebSockets), else the row is
reported as failed. For each row it prints req/s, p50 and p99 (ms), each figure's ratio to
the reference row (the peer doing the same work; for latencies above 1 means slower) and
the count of non-2xx answers (socket errors and timeouts included), and the server's CPU
time a request (all its processes, a database server's not counted: steadier than req/s
on a shared machine). `--json FILE` writes
every figure. `--profile DIR` records each Parley row with py-spy (raw collapsed stacks,
one file a row; sampling slows the server, so such figures are not comparable) and prints
the top functions. Last, it prints each goal of issue #23 with the ratio measured and
whether it holds.

Every request goes through the Lua script bench/http_load.lua (it counts each answer's
status and, for `conversation-jwt-jti`, sets the token), for peers and Parley alike.
The machine is shared and small: treat figures as relative, and compare runs made alike.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import jwt

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import profile_summary  # noqa: E402 - bench/ is not a package
import ws_handshakes  # noqa: E402

LUA = BENCH / "http_load.lua"
THREADS = 2
WARMUP_S = 1.0
MAX_DURATION_S = 600.0
START_TIMEOUT_S = 120.0
TOKENS_MIN = 50_000
TOKENS_PER_SECOND = 6_000
"""Fresh-`jti` tokens minted per second of a row (at least TOKENS_MIN): more than wrk sends."""
WS_TOKENS_MIN = 20_000
WS_TOKENS_PER_SECOND = 2_500

PUBLIC_URL = "https://parley.bench"
AUDIENCE = "parley.bench"
ISSUER = "https://backend.parley.bench"
SUBJECT = "bench-user"
CONVERSATION = "bench-conversation"
WS_CONVERSATION = "bench-ws"
AGENT = "bench"
DISABLE_AGENT = "bench-disable"
TOKEN_TTL_S = 3600

MODES = ("sqlite", "postgres1", "postgres2")
PEER_ROWS = ("peer-naive", "peer-db", "peer-write", "peer-health", "peer-ws")
PARLEY_ROWS = (
    "conversation-jwt",
    "conversation-jwt-jti",
    "agent",
    "agents",
    "agent-disable",
    "agent-after-writes",
    "agent-after-disables",
    "health",
    "ws-jwt",
    "ws-session",
)
REFERENCE = {
    "conversation-jwt": "peer-db",
    "conversation-jwt-jti": "peer-db",
    "agent": "peer-db",
    "agents": "peer-db",
    "agent-disable": "peer-write",
    "agent-after-writes": "peer-db",
    "agent-after-disables": "peer-db",
    "health": "peer-health",
    "ws-jwt": "peer-ws",
    "ws-session": "peer-ws",
    "peer-db": "peer-naive",
    "peer-write": "peer-naive",
    "peer-health": "peer-health",
    "peer-ws": "peer-ws",
}
"""A row's reference row (the peer doing the same work, issue #23); else `peer-naive`.
A mode's own peers (asyncpg in the PostgreSQL modes) are its rows' references."""
PEER_API_KEY = "peer-key"

GOALS: tuple[tuple[str, str, float], ...] = (
    ("sqlite", "agent", 1.5),
    ("sqlite", "conversation-jwt", 1.0),
    ("sqlite", "conversation-jwt-jti", 0.8),
    ("sqlite", "agent-disable", 1.0),
    ("sqlite", "health", 0.5),
    ("sqlite", "ws-jwt", 0.5),
    ("postgres2", "agent", 1.0),
    ("postgres2", "agents", 1.0),
    ("postgres2", "conversation-jwt", 1.0),
    ("postgres2", "conversation-jwt-jti", 1.0),
    ("postgres2", "agent-disable", 1.0),
)
"""Issue #23: (mode, row, least req/s ratio to the row's reference in that run)."""
GOAL_P99_MS = 100.0
"""Issue #23: p99 at most this in every row of embedded SQLite."""
WRK_INSTALL = (
    "wrk is not installed: run scripts/install-wrk (as root: apt-get install wrk), "
    "or set PARLEY_BENCH_WRK to a wrk binary"
)


# -- results ---------------------------------------------------------------------------


@dataclass
class Result:
    mode: str
    row: str
    rps: float = float("nan")
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    non_2xx: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    reference: str = "peer-naive"
    failed: str | None = None
    note: str | None = None
    server_cpu_ms: float = float("nan")
    ratios: dict[str, float] = field(default_factory=dict)


def reference_of(row: str) -> str:
    return REFERENCE.get(row, "peer-naive")


def add_ratios(results: list[Result]) -> None:
    """Each figure divided by the same figure of the row's reference: the peer measured in
    the row's own mode (asyncpg in the PostgreSQL modes), else the one of the peers' run."""
    peers = {(r.mode, r.row): r for r in results if r.row in PEER_ROWS and r.failed is None}
    for result in results:
        result.reference = reference_of(result.row)
        base = peers.get((result.mode, result.reference)) or peers.get(("peers", result.reference))
        if base is None or result.failed is not None:
            continue
        for name in ("rps", "p50_ms", "p99_ms"):
            mine, theirs = getattr(result, name), getattr(base, name)
            result.ratios[name] = mine / theirs if theirs else float("nan")


def _ratio(result: Result, name: str) -> str:
    value = result.ratios.get(name)
    return f"{value:5.2f}" if value is not None and math.isfinite(value) else "    -"


def print_table(results: list[Result]) -> None:
    header = (
        f"{'mode':<10} {'row':<21} {'req/s':>8} {'x':>5} {'p50 ms':>8} {'x':>5} "
        f"{'p99 ms':>8} {'x':>5}  {'ref':<11} {'non-2xx':>7} {'cpu ms':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        if r.failed is not None:
            print(f"{r.mode:<10} {r.row:<21} FAILED: {r.failed}")
            continue
        print(
            f"{r.mode:<10} {r.row:<21} {r.rps:8.0f} {_ratio(r, 'rps')} {r.p50_ms:8.1f} "
            f"{_ratio(r, 'p50_ms')} {r.p99_ms:8.1f} {_ratio(r, 'p99_ms')}  {r.reference:<11} "
            f"{r.non_2xx:7d} {r.server_cpu_ms:6.2f}"
        )
    for r in results:
        if r.failed is None and (r.non_2xx or r.note):
            detail = f"statuses {r.statuses}, socket errors {r.errors}" if r.non_2xx else ""
            print(f"  {r.mode}/{r.row}: {'; '.join(x for x in (detail, r.note) if x)}")
    print("  (cpu ms: the server's CPU time a request, all its processes; not the database's)")


def goal_lines(results: list[Result]) -> list[str]:
    """Each goal of issue #23, the figure measured and whether it holds."""
    found = {(r.mode, r.row): r for r in results if r.failed is None}
    lines = []
    for mode, row, least in GOALS:
        result = found.get((mode, row))
        ratio = result.ratios.get("rps") if result is not None else None
        if result is None or ratio is None or not math.isfinite(ratio):
            lines.append(f"{mode}/{row} >= {least:.1f}x {reference_of(row)}: not measured")
            continue
        verdict = "holds" if ratio >= least else "MISSED"
        lines.append(f"{mode}/{row} >= {least:.1f}x {result.reference}: {ratio:.2f}x, {verdict}")
    for result in results:
        if result.mode != "sqlite" or result.failed is not None:
            continue
        verdict = "holds" if result.p99_ms <= GOAL_P99_MS else "MISSED"
        lines.append(
            f"sqlite/{result.row} p99 <= {GOAL_P99_MS:.0f} ms: {result.p99_ms:.0f} ms, {verdict}"
        )
    return lines


def print_goals(results: list[Result]) -> None:
    print("\ngoals (issue #23; ratios to the peer doing the same work, measured in this run):")
    for line in goal_lines(results):
        print("  " + line)


# -- processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Process:
    """A server in its own process group on a free loopback port, its output in a file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log = cwd / f"{name}.log"
        argv = [a.replace("{port}", str(self.port)) for a in argv]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(  # noqa: S603 - fixed arguments
                argv,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its workers share the group: stop() ends them all
            )
        self.http = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}"

    def wait_ready(self, path: str) -> None:
        """Wait until `path` answers (any status); fail when the process exits or hangs."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                httpx.get(self.http + path, timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer within {START_TIMEOUT_S:.0f} s")

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of every process of the server's group so far."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # exited meanwhile
                continue
            if int(fields[2]) == self.process.pid:  # its process group
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after 10 s."""
        if self.process.poll() is not None and not _group_alive(self.process.pid):
            return
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                self.process.poll()
                if not _group_alive(self.process.pid):
                    return
                time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def uvicorn_argv(app: str, *extra: str) -> list[str]:
    """uvicorn as `parley serve` runs it: uvloop, httptools, no access log."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--app-dir",
        str(BENCH),
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
        *extra,
    ]


# -- tokens ----------------------------------------------------------------------------


@dataclass
class Signer:
    """The customer's EdDSA key: mints with PyJWT, as a customer backend would."""

    key: Ed25519PrivateKey
    kid: str
    jwk: dict[str, str]

    @classmethod
    def generate(cls) -> Signer:
        key = Ed25519PrivateKey.generate()
        jwk: dict[str, str] = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(key.public_key()))
        kid = f"bench-{secrets.token_hex(4)}"
        jwk.update({"kid": kid, "alg": "EdDSA", "use": "sig"})
        return cls(key, kid, jwk)

    def mint(self, conversation_id: str, *, jti: bool) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": SUBJECT,
            "conversation_id": conversation_id,
            "iat": now,
            "exp": now + TOKEN_TTL_S,
        }
        if jti:
            claims["jti"] = secrets.token_urlsafe(16)
        return jwt.encode(claims, self.key, algorithm="EdDSA", headers={"kid": self.kid})

    def mint_file(self, path: Path, count: int, conversation_id: str) -> Path:
        with path.open("w") as out:
            for _ in range(count):
                out.write(self.mint(conversation_id, jti=True) + "\n")
        return path


# -- one row -----------------------------------------------------------------------------


@dataclass
class Target:
    """What one row sends: method, URL, a fixed bearer token or a file of fresh ones."""

    method: str
    url: str
    token: str | None = None
    tokens_file: Path | None = None
    probe_token: str | None = None
    """The bearer of the single request checked before a tokens-file row."""


def wrk_binary() -> str:
    found = os.environ.get("PARLEY_BENCH_WRK") or shutil.which("wrk")
    if not found:
        raise SystemExit(WRK_INSTALL)
    return found


def run_wrk(target: Target, duration: float, connections: int) -> dict[str, Any]:
    argv = [
        wrk_binary(),
        "-t",
        str(THREADS),
        "-c",
        str(connections),
        "-d",
        f"{duration:g}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
    ]
    if target.token is not None:
        argv += ["-H", f"Authorization: Bearer {target.token}"]
    argv += [target.url, "--", target.method, str(THREADS)]
    if target.tokens_file is not None:
        argv.append(str(target.tokens_file))
    done = subprocess.run(  # noqa: S603 - fixed arguments
        argv, capture_output=True, text=True, timeout=duration + 60, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("HTTPLOAD "):
            parsed: dict[str, Any] = json.loads(line.removeprefix("HTTPLOAD "))
            return parsed
    raise RuntimeError(f"wrk said nothing usable ({done.returncode}): {done.stderr[-1000:]}")


def probe(target: Target) -> str | None:
    """One request; None when it answers 2xx, else what went wrong."""
    token = target.token or target.probe_token
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.request(target.method, target.url, headers=headers, timeout=10)
    except httpx.HTTPError as error:
        return f"probe failed: {error!r}"
    if not answer.is_success:
        return f"probe answered {answer.status_code}: {answer.text[:300]}"
    return None


def measure_http(
    mode: str,
    row: str,
    target: Target,
    args: argparse.Namespace,
    server: Process,
    warmup: Target | None = None,
) -> Result:
    result = Result(mode, row)
    refused = probe(target)
    if refused is not None:
        result.failed = refused
        return result
    run_wrk(warmup or target, WARMUP_S, args.connections)
    cpu_before = server.cpu_seconds()
    figures = run_wrk(target, args.duration, args.connections)
    set_server_cpu(result, server.cpu_seconds() - cpu_before, figures["requests"])
    fill(result, figures)
    return result


def measure_after_writes(
    mode: str,
    row: str,
    writes: Target,
    read: Target,
    args: argparse.Namespace,
    server: Process,
) -> Result:
    """`read` measured right after `--duration` seconds of `writes` (issue #38 item 11).

    Both are probed and `read` warmed up first, so that the read path is warm and only the
    burst lies between the warm-up and the measurement; the read is then measured the
    moment the burst ends, with no warm-up of its own."""
    result = Result(mode, row)
    refused = probe(read) or probe(writes)
    if refused is not None:
        result.failed = refused
        return result
    run_wrk(read, WARMUP_S, args.connections)
    burst = run_wrk(writes, args.duration, args.connections)
    cpu_before = server.cpu_seconds()
    figures = run_wrk(read, args.duration, args.connections)
    set_server_cpu(result, server.cpu_seconds() - cpu_before, figures["requests"])
    fill(result, figures)
    seconds = burst["duration_us"] / 1e6
    statuses = burst["statuses"]
    failed = sum(v for k, v in statuses.items() if not k.startswith("2"))
    failed += sum(burst["errors"].values())
    result.note = (
        f"after {seconds:.0f} s of {burst_name(writes)} at "
        f"{burst['requests'] / seconds if seconds else 0:.0f} req/s, p99 "
        f"{burst['p99_us'] / 1000:.0f} ms, {failed} non-2xx"
    )
    return result


def burst_name(writes: Target) -> str:
    """How a row's note names its burst: the request, without the server's address."""
    if writes.tokens_file is not None:
        return "fresh-jti reads"
    return f"{writes.method} /{writes.url.split('/', 3)[-1]}"


def fill(result: Result, figures: dict[str, Any]) -> None:
    """Copy one wrk run's figures (req/s, p50, p99, statuses) into `result`."""
    seconds = figures["duration_us"] / 1e6
    result.rps = figures["requests"] / seconds if seconds else 0.0
    result.p50_ms = figures["p50_us"] / 1000
    result.p99_ms = figures["p99_us"] / 1000
    result.statuses = dict(sorted(figures["statuses"].items()))
    result.errors = {k: v for k, v in figures["errors"].items() if v}
    result.non_2xx = sum(v for k, v in result.statuses.items() if not k.startswith("2"))
    result.non_2xx += sum(result.errors.values())


def measure_ws(
    mode: str,
    row: str,
    urls: Callable[[], Iterator[str]],
    args: argparse.Namespace,
    server: Process,
) -> Result:
    result = Result(mode, row)
    refused = ws_handshakes.probe(next(urls()))
    if refused is not None:
        result.failed = refused
        return result
    ws_handshakes.measure(urls(), args.connections, WARMUP_S)
    cpu_before = server.cpu_seconds()
    figures = ws_handshakes.measure(urls(), args.connections, args.duration)
    set_server_cpu(result, server.cpu_seconds() - cpu_before, figures["requests"])
    result.rps = figures["rps"]
    result.p50_ms = figures["p50_ms"]
    result.p99_ms = figures["p99_ms"]
    result.statuses = figures["statuses"]
    result.non_2xx = figures["non_2xx"]
    result.note = f"client CPU {figures['client_cpu']:.2f} cores"
    if figures["client_cpu"] > 0.9:
        result.note += " (the client may be the ceiling)"
    return result


def set_server_cpu(result: Result, cpu_seconds: float, requests: int) -> None:
    """The server's CPU time a request: steadier than req/s on a shared machine, and
    what a change to the request path changes (a database server's own CPU not counted)."""
    result.server_cpu_ms = cpu_seconds * 1000 / requests if requests else float("nan")


# -- peers -------------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.signer = Signer.generate()
        self.token = self.signer.mint(CONVERSATION, jti=False)
        self.results: list[Result] = []
        self.profiles: dict[str, Path] = {}

    def wanted(self, row: str) -> bool:
        only: set[str] = self.args.only_rows
        return row in only

    def record(self, result: Result) -> None:
        self.results.append(result)
        shown = "FAILED " + result.failed if result.failed else f"{result.rps:.0f} req/s"
        print(f"[{result.mode}] {result.row}: {shown}", file=sys.stderr, flush=True)

    def base_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith(("PARLEY_", "BENCH_"))}

    def peer_env(self, **extra: str) -> dict[str, str]:
        return {
            **self.base_env(),
            "BENCH_JWT_JWK": json.dumps(self.signer.jwk),
            "BENCH_JWT_ISSUER": ISSUER,
            "BENCH_JWT_AUDIENCE": AUDIENCE,
            "BENCH_CONVERSATION_ID": CONVERSATION,
            **extra,
        }

    def run_peer(
        self, mode: str, row: str, app: str, measure: Callable[[Process], Result], **env: str
    ) -> None:
        workers = env.pop("workers", "1")
        cwd = self.workdir / f"{mode}-{row}-{secrets.token_hex(2)}"
        cwd.mkdir()
        server = Process(row, uvicorn_argv(app, "--workers", workers), self.peer_env(**env), cwd)
        try:
            server.wait_ready("/")
            result = measure(server)
            server.check_alive()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
            result = Result(mode, row, failed=str(error)[:500])
        finally:
            server.stop()
        self.record(result)

    def conversation_target(self, server: Process) -> Target:
        return Target("GET", f"{server.http}/v1/conversations/{CONVERSATION}", self.token)

    def peers(self) -> None:
        args = self.args
        if self.wanted("peer-naive"):
            self.run_peer(
                "peers",
                "peer-naive",
                "peer_naive:app",
                lambda s: measure_http("peers", "peer-naive", self.conversation_target(s), args, s),
            )
        if self.wanted("peer-db"):
            self.peer_db("peers")
        if self.wanted("peer-write"):
            self.peer_write("peers")
        if self.wanted("peer-health"):
            self.run_peer(
                "peers",
                "peer-health",
                "peer_bare:app",
                lambda s: measure_http(
                    "peers", "peer-health", Target("GET", s.http + "/health"), args, s
                ),
            )
        if self.wanted("peer-ws"):

            def bare_ws(server: Process) -> Result:
                def urls() -> Iterator[str]:
                    while True:
                        yield server.ws + "/"

                return measure_ws("peers", "peer-ws", urls, args, server)

            self.run_peer(
                "peers",
                "peer-ws",
                "peer_bare:ws_app",
                bare_ws,
            )

    def peer_db(self, mode: str, database_url: str | None = None, workers: int = 1) -> None:
        env = {"workers": str(workers)}
        if database_url is not None:
            env["BENCH_DB_URL"] = database_url.replace("postgresql://", "postgresql+asyncpg://")
        self.run_peer(
            mode,
            "peer-db",
            "peer_db:app",
            lambda s: measure_http(mode, "peer-db", self.conversation_target(s), self.args, s),
            **env,
        )

    def peer_write(self, mode: str, database_url: str | None = None, workers: int = 1) -> None:
        """The one-write peer: a dict-looked-up API key and one committed UPDATE."""
        env = {"workers": str(workers), "BENCH_API_KEY": PEER_API_KEY}
        if database_url is not None:
            env["BENCH_DB_URL"] = database_url.replace("postgresql://", "postgresql+asyncpg://")

        def write(server: Process) -> Result:
            url = f"{server.http}/v1/agents/{DISABLE_AGENT}/disable"
            target = Target("POST", url, PEER_API_KEY)
            return measure_http(mode, "peer-write", target, self.args, server)

        self.run_peer(mode, "peer-write", "peer_db:app", write, **env)

    # -- Parley --------------------------------------------------------------------------

    def parley_env(self, database_url: str | None) -> dict[str, str]:
        env = {
            **self.base_env(),
            "PARLEY_PUBLIC_URL": PUBLIC_URL,
            "PARLEY_STT": "none",
            "PARLEY_JWT_RATE_PER_MINUTE": "1000000",
            "PARLEY_JWT_RATE_BURST": "1000000",
        }
        if database_url is not None:
            env["PARLEY_DATABASE_URL"] = database_url
            env["PARLEY_REDIS_URL"] = self.args.redis
        return env

    def parley(self, mode: str, database_url: str | None, workers: int) -> None:
        rows = [row for row in PARLEY_ROWS if self.wanted(row)]
        if not rows:
            return
        cwd = self.workdir / mode
        cwd.mkdir()
        argv = [sys.executable, "-m", "parley", "serve", "--port", "{port}"]
        argv += ["--workers", str(workers)]
        server = Process(f"parley-{mode}", argv, self.parley_env(database_url), cwd)
        try:
            server.wait_ready("/health")
            api_key = first_api_key(server.log)
            prepare_tenant(server, api_key, self.signer)
            if self.args.workspace_limits:
                limit_workspace(server, api_key)
            for row in rows:
                try:
                    result = self.parley_row(mode, row, server, api_key, cwd)
                    server.check_alive()
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
                    result = Result(mode, row, failed=str(error)[:500])
                self.record(result)
                if server.process.poll() is not None:
                    break
        except (RuntimeError, OSError, httpx.HTTPError) as error:
            self.record(Result(mode, "start", failed=str(error)[:500]))
        finally:
            server.stop()

    def parley_row(self, mode: str, row: str, server: Process, key: str, cwd: Path) -> Result:
        args = self.args
        conversation = self.conversation_target(server)
        if row == "ws-jwt":
            return self.profiled(mode, row, server, lambda: self.parley_ws(mode, server))
        if row == "ws-session":
            token = create_session_token(server, key)
            urls = functools.partial(_repeat, f"{server.ws}/v1/sts/ws?session_token={token}")
            return self.profiled(
                mode, row, server, lambda: measure_ws(mode, row, urls, args, server)
            )
        if row == "conversation-jwt":
            target = conversation
        elif row == "conversation-jwt-jti":
            target = self.fresh_jti_target(mode, conversation, cwd)
            # The warm-up sends the token without `jti`: the file's tokens are for the row.
            return self.profiled(
                mode,
                row,
                server,
                lambda: measure_http(mode, row, target, args, server, conversation),
            )
        elif row in ("agent-after-writes", "agent-after-disables"):
            if row == "agent-after-writes":
                writes = self.fresh_jti_target(mode, conversation, cwd)
            else:
                writes = Target("POST", f"{server.http}/v1/agents/{DISABLE_AGENT}/disable", key)
            read = Target("GET", f"{server.http}/v1/agents/{AGENT}", key)
            return self.profiled(
                mode,
                row,
                server,
                lambda: measure_after_writes(mode, row, writes, read, args, server),
                seconds=2 * args.duration,
            )
        elif row == "agent":
            target = Target("GET", f"{server.http}/v1/agents/{AGENT}", key)
        elif row == "agents":
            target = Target("GET", f"{server.http}/v1/agents", key)
        elif row == "agent-disable":
            target = Target("POST", f"{server.http}/v1/agents/{DISABLE_AGENT}/disable", key)
        else:
            target = Target("GET", f"{server.http}/health")
        return self.profiled(
            mode, row, server, lambda: measure_http(mode, row, target, args, server)
        )

    def fresh_jti_target(self, mode: str, conversation: Target, cwd: Path) -> Target:
        """The conversation read with a pre-minted JWT and `jti` a request: a write each."""
        count = max(TOKENS_MIN, math.ceil(self.args.duration * TOKENS_PER_SECOND))
        print(f"[{mode}] minting {count} tokens", file=sys.stderr, flush=True)
        tokens = self.signer.mint_file(
            cwd / f"tokens-{secrets.token_hex(2)}.txt", count, CONVERSATION
        )
        return Target(
            "GET",
            conversation.url,
            tokens_file=tokens,
            probe_token=self.signer.mint(CONVERSATION, jti=True),
        )

    def parley_ws(self, mode: str, server: Process) -> Result:
        count = max(WS_TOKENS_MIN, math.ceil(self.args.duration * WS_TOKENS_PER_SECOND))
        print(f"[{mode}] minting {count} WebSocket tokens", file=sys.stderr, flush=True)
        pool = [self.signer.mint(WS_CONVERSATION, jti=True) for _ in range(count)]
        base = f"{server.ws}/v1/sts/ws?jwt="

        def urls() -> Iterator[str]:
            # Every handshake gets a token of its own; minted here if the pool runs out.
            while pool:
                yield base + pool.pop()
            while True:
                yield base + self.signer.mint(WS_CONVERSATION, jti=True)

        return measure_ws(mode, "ws-jwt", urls, self.args, server)

    def profiled(
        self,
        mode: str,
        row: str,
        server: Process,
        run: Callable[[], Result],
        seconds: float | None = None,
    ) -> Result:
        """Run one row; with --profile, py-spy records the server during the measurement
        (`seconds`: the row's loaded time, when it is not `--duration`)."""
        if self.args.profile is None:
            return run()
        out = self.args.profile / f"{mode}-{row}.txt"
        duration = math.ceil(WARMUP_S + (seconds or self.args.duration) + 2)
        recorder = subprocess.Popen(  # noqa: S603 - fixed arguments
            [
                py_spy_binary(),
                "record",
                "--pid",
                str(server.process.pid),
                "--subprocesses",
                "--format",
                "raw",
                "--duration",
                str(duration),
                "--output",
                str(out),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)  # py-spy attaches
            result = run()
            recorder.wait(duration + 30)
        finally:
            if recorder.poll() is None:
                recorder.kill()
                recorder.wait()
        self.profiles[f"{mode}/{row}"] = out
        result.note = (result.note + "; " if result.note else "") + "profiled with py-spy"
        return result


def _repeat(url: str) -> Iterator[str]:
    while True:
        yield url


def create_session_token(server: Process, api_key: str) -> str:
    """A session token (1 h) for the `ws-session` row's handshakes."""
    answer = httpx.post(
        f"{server.http}/v1/auth/session_token",
        headers={"Authorization": f"Bearer {api_key}"},
        json={"ttl_seconds": 3600},
        timeout=30,
    )
    if not answer.is_success:
        raise RuntimeError(f"session token: {answer.status_code} {answer.text[:300]}")
    token: str = answer.json()["session_token"]
    return token


def first_api_key(log: Path) -> str:
    for line in log.read_text().splitlines():
        if line.strip().startswith("parley_sk_"):
            return line.strip()
    raise RuntimeError("parley serve printed no API key: is the database fresh?")


def prepare_tenant(server: Process, api_key: str, signer: Signer) -> None:
    """Register the static EdDSA key, create two agents and the conversation of the rows."""
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=server.http, headers=headers, timeout=30) as api:
        steps = [
            ("PUT", "/v1/auth/jwt", {"issuers": [ISSUER], "public_keys": [signer.jwk]}),
            ("POST", "/v1/agents", {"name": AGENT, "welcome_message": None}),
            ("POST", "/v1/agents", {"name": DISABLE_AGENT, "welcome_message": None}),
            ("POST", "/v1/conversations", {"agent": AGENT, "id": CONVERSATION}),
        ]
        for method, path, body in steps:
            answer = api.request(method, path, json=body)
            if not answer.is_success:
                raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")


WORKSPACE_LIMITS: dict[str, Any] = {
    # wrk's loopback address last, after networks it is not in: the check walks them all.
    "ip_allowlist": [f"10.{i}.0.0/16" for i in range(8)] + ["2001:db8::/32", "127.0.0.1"],
    "max_active_conversations": 1000,
}
"""`--workspace-limits`: an allowlist of ten entries that admits the load generator, and a
cap on active conversations (API.md section 17), with a cap on the project `main` too."""


def limit_workspace(server: Process, api_key: str) -> None:
    """Set the workspace's IP allowlist and cap, and `main`'s cap (`--workspace-limits`)."""
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=server.http, headers=headers, timeout=30) as api:
        for path, body in (
            ("/v1/workspace", WORKSPACE_LIMITS),
            ("/v1/projects/main", {"max_active_conversations": 100}),
        ):
            answer = api.patch(path, json=body)
            if not answer.is_success:
                raise RuntimeError(f"PATCH {path}: {answer.status_code} {answer.text[:300]}")


def py_spy_binary() -> str:
    beside = Path(sys.executable).parent / "py-spy"
    found = shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if not found:
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    return found


# -- profiles --------------------------------------------------------------------------


def print_profiles(profiles: dict[str, Path]) -> None:
    for name, raw in profiles.items():
        if not raw.exists():
            print(f"\nprofile {name}: py-spy wrote nothing")
            continue
        print(f"\nprofile {name} ({raw}):")
        print("\n".join("  " + line for line in profile_summary.summarize(raw).lines()))


# -- PostgreSQL and Redis ------------------------------------------------------------------


async def create_database(admin: str) -> str:
    import asyncpg

    name = f"parley_bench_{secrets.token_hex(4)}"
    connection = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    return admin.rsplit("/", 1)[0] + f"/{name}"


async def drop_database(admin: str, url: str) -> None:
    import asyncpg

    name = url.rsplit("/", 1)[1]
    connection = await asyncpg.connect(admin.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await connection.close()


def flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


# -- main ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="parley-http-load-") as tmp:
        bench = Bench(args, Path(tmp))
        bench.peers()
        for mode in args.modes:
            if mode == "sqlite":
                bench.parley(mode, None, 1)
                continue
            url = asyncio.run(create_database(args.postgres))
            try:
                flush_redis(args.redis)
                workers = 1 if mode == "postgres1" else 2
                bench.parley(mode, url, workers)
                if bench.wanted("peer-db"):
                    bench.peer_db(mode, url, workers)
                if bench.wanted("peer-write"):
                    bench.peer_write(mode, url, workers)
            finally:
                asyncio.run(drop_database(args.postgres, url))
                flush_redis(args.redis)
        add_ratios(bench.results)
        print_table(bench.results)
        print_goals(bench.results)
        if bench.profiles:
            print_profiles(bench.profiles)
        return bench.results


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=8.0, help="seconds a row (8)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (32)")
    parser.add_argument(
        "--modes",
        default=",".join(MODES),
        help="comma-separated, of " + ", ".join(MODES) + " (all)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="ROW",
        choices=PEER_ROWS + PARLEY_ROWS,
        help="run these rows only (their reference rows run too): "
        + ", ".join(PEER_ROWS + PARLEY_ROWS),
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "PARLEY_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
        help="a PostgreSQL URL whose server gets a fresh database per mode "
        "(default: PARLEY_TEST_DATABASE_URL)",
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14", help="flushed per mode")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    parser.add_argument(
        "--workspace-limits",
        action="store_true",
        help="give Parley's tenant a non-empty IP allowlist (admitting the load generator) "
        "and caps on active conversations (API.md section 17)",
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy each Parley row into this directory"
    )
    args = parser.parse_args()
    if not 0 < args.duration <= MAX_DURATION_S:
        parser.error(f"--duration must be in (0, {MAX_DURATION_S:.0f}]")
    if not THREADS <= args.connections <= 10_000:
        parser.error(f"--connections must be {THREADS} to 10000")
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = set(args.modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    only = set(args.only or PEER_ROWS + PARLEY_ROWS)
    only |= {reference_of(row) for row in only}
    only |= {reference_of(row) for row in only}
    args.only_rows = only
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        py_spy_binary()
    return args


def main() -> None:
    args = parse_args()
    wrk_binary()
    started = time.monotonic()
    load_before = os.getloadavg()
    results = run(args)
    load_after = os.getloadavg()
    print(
        f"\n{time.monotonic() - started:.0f} s; load average (1, 5, 15 min) before "
        f"{load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}, after "
        f"{load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f} on {os.cpu_count()} CPUs"
    )
    if args.json is not None:
        report = {
            "duration_s": args.duration,
            "connections": args.connections,
            "threads": THREADS,
            "modes": args.modes,
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": load_after,
            "rows": [asdict(r) for r in results],
        }
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
