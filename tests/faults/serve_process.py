"""`parley serve` as a real process: started, killed (-9), stopped (SIGTERM) and restarted
by the test, as an operator or a power cut would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.faults.pg_cluster import free_port

START_SECONDS = 90


class ServeProcess:
    """`python -m parley serve` in `cwd` with the given PARLEY_* variables."""

    def __init__(self, cwd: Path, *, port: int | None = None, **variables: str) -> None:
        self.cwd = cwd
        self.port = port or free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        self.env.update({"PARLEY_STT": "none", "PARLEY_LOG_LEVEL": "warning", **variables})
        if self.env.get("PARLEY_DATABASE_URL", "").startswith("postgresql"):
            # The shared PostgreSQL takes 100 connections; a server keeps up to its pool
            # size open (20, and its webhook sender as many), and the suite runs several
            # fleets at once: a run hit "too many clients" with the default. Ten a process
            # still serves these tests' bursts (at most 10 concurrent requests each).
            self.env.setdefault("PARLEY_DATABASE_POOL_SIZE", "10")
        self.process: subprocess.Popen[str] | None = None
        self.first_key: str | None = None
        self.output = cwd / f"serve-{self.port}.log"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start and wait for /health; keep the first API key if this run printed one."""
        log = self.output.open("a")
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-m", "parley", "serve", "--port", str(self.port)],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()
        deadline = time.monotonic() + START_SECONDS
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"parley serve exited: {self.output.read_text()[-3000:]}")
            try:
                status = httpx.get(f"{self.http}/health", timeout=1).status_code
            except httpx.HTTPError as error:  # not listening yet
                last = repr(error)
            else:
                if status == 200:
                    break
                last = f"/health answered {status}"
            time.sleep(0.1)
        else:
            raise RuntimeError(
                f"parley serve did not answer (last: {last}): {self.output.read_text()[-3000:]}"
            )
        for line in self.output.read_text().splitlines():
            if line.strip().startswith("parley_sk_"):
                self.first_key = line.strip()

    def kill(self) -> None:
        """kill -9: nothing runs after it."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self) -> float:
        """SIGTERM; return the seconds until the process exited."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(30)
        return time.monotonic() - started

    def children(self, command: str) -> list[int]:
        """The PIDs of this process's children whose command line holds `command`."""
        assert self.process is not None
        return children_of(self.process.pid, command)

    def ensure_stopped(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def children_of(parent: int, command: str) -> list[int]:
    """The PIDs of `parent`'s living children whose command line holds `command`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent and state != "Z" and command in cmdline:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"
