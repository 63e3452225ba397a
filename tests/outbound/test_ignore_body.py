"""A status-only call (`ignore_body=True`, webhook deliveries; API.md section 14): the answer's
status counts whatever its body, and the body never holds the call past a short drain."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from parley.outbound import DRAIN_SECONDS, AddressPolicy, OutboundClient

pytestmark = pytest.mark.anyio

LOCAL = AddressPolicy(allow_http=True, allow_private_networks=True)


@pytest.fixture
def dripping_server() -> Iterator[int]:
    """Answers 200 with a declared 1000-byte body, then sends one byte a second."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
            while not stop.wait(1.0):
                try:
                    connection.sendall(b"x")
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(5)


async def test_ignore_body_slow_body_after_2xx_still_answers_within_drain(
    dripping_server: int,
) -> None:
    client = OutboundClient()
    started = time.monotonic()
    try:
        answer = await client.request(
            "POST",
            f"http://127.0.0.1:{dripping_server}/hook",
            policy=LOCAL,
            content=b"{}",
            timeout_s=10,
            max_bytes=64 * 1024,
            ignore_body=True,
        )
    finally:
        await client.aclose()
    took = time.monotonic() - started
    assert (answer.status, answer.body) == (200, b"")
    assert took < DRAIN_SECONDS + 2
