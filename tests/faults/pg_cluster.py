"""A PostgreSQL cluster of the test's own, on a free loopback port, that tests stop, kill,
pause and restart (never the shared server).

The binaries come from `PARLEY_TEST_PG_BIN` (default `/usr/lib/postgresql/15/bin`); when
they are missing the fixture fails, it never skips. PostgreSQL refuses to run as root, so
under root every command runs as the `postgres` OS user, which owns the data directory.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.ports import free_port

PG_BIN = Path(os.environ.get("PARLEY_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
COMMAND_TIMEOUT_SECONDS = 60


class PostgresCluster:
    """One initdb'd data directory and the server running on it."""

    def __init__(self) -> None:
        for tool in ("initdb", "pg_ctl", "postgres"):
            path = PG_BIN / tool
            assert path.is_file(), (
                f"{path} is missing: install PostgreSQL (apt-get install postgresql) or set "
                "PARLEY_TEST_PG_BIN to its bin directory; the fault tests need their own cluster"
            )
        self.port = free_port()
        # Under /tmp itself: pytest's tmp dirs are private to root, and postgres must enter it.
        self.root = Path(tempfile.mkdtemp(prefix="parley-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
            "-c fsync=off -c max_connections=60 -c shared_buffers=16MB"
        )
        self._run("pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data),
                  "-l", str(self.log), "-o", options)  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """Stop the server with `pg_ctl stop -m fast|immediate|smart`."""
        self._run("pg_ctl", "stop", "-w", "-t", "30", "-D", str(self.data), "-m", mode)

    def processes(self) -> list[int]:
        """Return the postmaster's PID and those of its children (backends, workers)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                children.append(int(entry.name))
        return [postmaster, *children]

    def pause(self) -> list[int]:
        """SIGSTOP the whole server (a hung database); return the PIDs stopped."""
        stopped = self.processes()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        return stopped

    @staticmethod
    def resume(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                continue

    def destroy(self) -> None:
        """Stop the server if it runs and remove its files."""
        if (self.data / "postmaster.pid").exists():
            try:
                self.resume(self.processes())
                self.stop("immediate")
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(PG_BIN / tool), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        started = time.monotonic()
        result = subprocess.run(  # noqa: S603 (fixed binaries, arguments built here)
            command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False
        )
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{tool} failed after {time.monotonic() - started:.1f}s: "
                f"{result.stderr.strip()}\n{log[-2000:]}"
            )
