"""A full disk (issue #22 item 4): `parley serve` on a SQLite file on a small tmpfs, which the
test fills to the last byte. Writes answer 503 and recover without a restart once space is
back; meanwhile `/health` answers 503 (a database that cannot write is not ready), the log
says the disk is full, and a socket whose `config` cannot be stored gets an `error` frame
naming the cause and is closed at once (1013), not 10 s later as "config timeout".

Mounting needs root; a test that cannot mount fails, it never skips.
"""

from __future__ import annotations

import asyncio
import errno
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DISK_SIZE = "4m"
DISK_FULL = "disk is full"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(  # noqa: S603 - fixed arguments
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test runs as root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)  # noqa: S603, S607


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses another byte; return it."""
    filler = disk / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as out:
        for _ in range(10_000):  # bounded: far more than the disk holds
            try:
                out.write(chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
        else:
            raise AssertionError("the disk never filled")
    return filler


async def config_outcome(serve: ServeProcess, key: str, agent: str) -> tuple[str, int, float]:
    """Send `config`; return the frames' text, the close code and the seconds until closed."""
    started = time.monotonic()
    frames: list[str] = []
    async with connect(
        f"{serve.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {key}"}
    ) as ws:
        await ws.send(json.dumps({"type": "config", "agent": agent}))
        try:
            for _ in range(10):  # bounded
                frames.append(str(await asyncio.wait_for(ws.recv(), 15)))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else 0  # 0: no close frame
            return "\n".join(frames), code, time.monotonic() - started
    raise AssertionError(f"the socket stayed open: {frames}")


async def test_full_disk_health_503_log_says_why_socket_closed_at_once_then_recovers(
    small_disk: Path, tmp_path: Path
) -> None:
    serve = ServeProcess(tmp_path, PARLEY_DATABASE_URL=f"sqlite:///{small_disk / 'parley.db'}")
    try:
        serve.start()
        assert serve.first_key is not None
        headers = {"Authorization": f"Bearer {serve.first_key}"}
        async with httpx.AsyncClient(base_url=serve.http, headers=headers, timeout=30) as api:
            made = await api.post("/v1/agents", json={"name": "before", "welcome_message": None})
            assert made.status_code == 201, made.text

            filler = fill(small_disk)
            refused = await api.post("/v1/agents", json={"name": "during"})
            assert refused.status_code == 503, refused.text
            assert DISK_FULL in refused.json()["error"]["message"]
            health = await api.get("/health")
            assert health.status_code == 503, health.text
            assert DISK_FULL in health.json()["error"]["message"]
            frames, code, seconds = await config_outcome(serve, serve.first_key, "before")
            assert DISK_FULL in frames
            assert code == 1013
            assert seconds < 5
            assert "the disk is full" in serve.output.read_text()

            filler.unlink()
            for _ in range(50):  # bounded: 5 s
                if (await api.get("/health")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await api.get("/health")).status_code == 200
            again = await api.post("/v1/agents", json={"name": "after", "welcome_message": None})
            assert again.status_code == 201, again.text
    finally:
        serve.ensure_stopped()
