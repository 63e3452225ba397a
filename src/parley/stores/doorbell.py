"""A doorbell between processes of one machine: a Unix datagram socket that carries rings.

`parley serve`'s workers ring the webhook sender process (composition/webhook_sender.py)
after a commit that claimed deliveries for it. A ring names only what to look at (a short
word): what to do is in the database, so a ring that is lost (the sender restarting, its
queue full) costs at most the sender's next poll, never an event. Written by hand: no
library does this small thing, and the standard library's socket and asyncio's datagram
endpoint are the whole of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path


class Doorbell:
    """The ringing side: a non-blocking datagram to `path`, never waiting, never raising."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._socket.setblocking(False)

    def ring(self, kind: str) -> bool:
        """Send one ring of `kind`; False when it could not be sent (nobody listening, its
        queue full)."""
        try:
            self._socket.sendto(kind.encode("ascii"), os.fsencode(self.path))
        except OSError:
            return False
        return True

    def close(self) -> None:
        self._socket.close()


MAX_KIND_BYTES = 32


class _Listener(asyncio.DatagramProtocol):
    def __init__(self, on_ring: Callable[[str], None]) -> None:
        self._on_ring = on_ring

    def datagram_received(self, data: bytes, addr: object) -> None:  # noqa: ARG002
        if len(data) <= MAX_KIND_BYTES and data.isascii():
            self._on_ring(data.decode("ascii"))


@contextlib.asynccontextmanager
async def listening(path: Path, on_ring: Callable[[str], None]) -> AsyncIterator[None]:
    """Call `on_ring(kind)` for every ring sent to `path` while the block runs (a datagram
    that is no short ASCII word is dropped: `on_ring` decides what an unknown kind means).

    A socket file left by an earlier life at `path` is replaced; the file is removed at the
    end. Only this machine's user can ring (the file is made 0600).
    """
    bound = _bind(path)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: _Listener(on_ring), sock=bound)
    try:
        yield
    finally:
        transport.close()
        _remove(path)


def _bind(path: Path) -> socket.socket:
    """A datagram socket bound at `path` (a file left there by an earlier life replaced),
    readable and writable by this user alone."""
    _remove(path)
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        bound.bind(os.fsencode(path))
        path.chmod(0o600)
    except BaseException:
        bound.close()
        raise
    return bound


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
