"""The doorbell between `parley serve`'s workers and its webhook sender: a real Unix
datagram socket, rung from a plain socket as a worker rings it."""

from __future__ import annotations

import asyncio
import socket
import stat
from pathlib import Path

import pytest

from parley.stores.doorbell import Doorbell, listening

pytestmark = pytest.mark.anyio


async def rings_heard(heard: list[str], count: int) -> None:
    for _ in range(100):
        if len(heard) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(heard)} rings heard, not {count}")


async def test_doorbell_ring_reaches_the_listener_with_its_kind(tmp_path: Path) -> None:
    heard: list[str] = []
    path = tmp_path / "bell"
    async with listening(path, heard.append):
        bell = Doorbell(path)
        assert bell.ring("pick-up")
        assert bell.ring("poll")
        await rings_heard(heard, 2)
        bell.close()
    assert heard == ["pick-up", "poll"]


async def test_doorbell_ring_with_nobody_listening_is_false_and_never_raises(
    tmp_path: Path,
) -> None:
    bell = Doorbell(tmp_path / "nobody")
    assert bell.ring("pick-up") is False  # no file
    bell.close()
    async with listening(tmp_path / "gone", lambda _kind: None):
        pass
    gone = Doorbell(tmp_path / "gone")
    assert gone.ring("poll") is False
    gone.close()


async def test_doorbell_socket_is_private_replaces_a_stale_file_and_is_removed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bell"
    path.write_text("left by an earlier life")
    async with listening(path, lambda _kind: None):
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.exists()


async def test_doorbell_drops_a_datagram_that_is_no_short_word(tmp_path: Path) -> None:
    heard: list[str] = []
    path = tmp_path / "bell"
    async with listening(path, heard.append):
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as raw:
            raw.sendto(b"\xff\xfe", str(path))
            raw.sendto(b"x" * 1000, str(path))
            raw.sendto(b"poll", str(path))
        await rings_heard(heard, 1)
        await asyncio.sleep(0.05)
    assert heard == ["poll"]
