"""One HTTP/1.1 exchange over a raw socket, from a chosen loopback address: bytes no HTTP
client would send, and the answer as the server wrote it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def code(self) -> str:
        """The error envelope's `code`."""
        code: str = json.loads(self.body)["error"]["code"]
        return code


async def exchange(
    port: int, raw: bytes, *, source: str = "127.0.0.1", within: float = 5.0
) -> Answer:
    """Connect from `source`, send `raw` and read until the server closes the connection."""
    return await converse(await connect(port, source=source), raw, within=within)


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int, *, source: str = "127.0.0.1") -> Connection:
    """Open a connection to the loopback server on `port` from the address `source`."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def converse(connection: Connection, raw: bytes, *, within: float = 5.0) -> Answer:
    """Send `raw` on an open connection and read until the server closes (or resets) it.

    The answer is read while `raw` is still being written: a server that answers before it
    has read everything (413 on a declared length) is heard, not lost to a broken pipe."""
    reader, writer = connection
    chunks: list[bytes] = []

    async def write() -> None:
        with contextlib.suppress(ConnectionError):
            writer.write(raw)
            await writer.drain()

    async def read() -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                chunks.append(chunk)

    writing = asyncio.create_task(write())
    try:
        await asyncio.wait_for(read(), within)
    finally:
        writing.cancel()
        writer.close()
    return parse(b"".join(chunks))


def parse(answer: bytes) -> Answer:
    """Split a response into status, headers (lower-case names) and body."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split()[1]) if head else 0, headers, body)
