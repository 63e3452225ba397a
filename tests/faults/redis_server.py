"""A Redis server of the test's own, on a free loopback port, that tests stop, pause and
restart (never the shared one). Without persistence, as the finding describes: a restart
loses every key. `redis-server` must be on PATH (or `PARLEY_TEST_REDIS_SERVER`); when it is
missing the fixture fails, it never skips."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.faults.pg_cluster import free_port

REDIS_SERVER = os.environ.get("PARLEY_TEST_REDIS_SERVER") or shutil.which("redis-server")


class RedisServer:
    """One redis-server process; `stop`, `start`, `pause` and `resume` it at will."""

    def __init__(self) -> None:
        assert REDIS_SERVER, (
            "redis-server is missing: install Redis (apt-get install redis-server) or set "
            "PARLEY_TEST_REDIS_SERVER; the Redis fault tests need a server of their own"
        )
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="parley-redis-"))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server (empty) and wait until it answers PING."""
        self._process = subprocess.Popen(  # noqa: S603 - a fixed binary, arguments built here
            [
                str(REDIS_SERVER), "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.dir),
                "--logfile", str(self.dir / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._answers():
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        """Kill the server: its data is gone (no persistence)."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None

    def pause(self) -> None:
        """SIGSTOP the server: connections hang, as with a stuck host."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)

    def destroy(self) -> None:
        if self._process is not None:
            self.resume()
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False
