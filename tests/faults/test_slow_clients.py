"""Slow and hostile clients cannot hold `parley serve` (issue #22 items 1 and 3).

A real `parley serve` with short limits (headers and body within 1 s, 40 connections) is
talked to over raw sockets, many at once and every read bounded: a half-sent request line
or a body shorter than its `Content-Length` is answered 408 and closed; an oversized request
line 414 (a WebSocket upgrade too, which got no answer at all), oversized headers 431;
connections past the cap 503 at once; `/health` is served meanwhile. Invalid UTF-8 in text
frames closes each socket with 1007 and costs the log one warning line, not a traceback
per frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.faults import raw_http
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

HEADER_TIMEOUT = 1.0
MAX_CONNECTIONS = 40
SLOW_CLIENTS = 30


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("slow-clients"),
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_HTTP_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT),
        PARLEY_HTTP_BODY_TIMEOUT_SECONDS="1",
        PARLEY_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
    )
    try:
        process.start()
        yield process
    finally:
        process.ensure_stopped()


async def exchange(port: int, raw: bytes) -> tuple[int, bytes, float]:
    """Send raw bytes and read until the server closes; return status, body and seconds."""
    started = time.monotonic()
    answer = await raw_http.exchange(port, raw)
    return answer.status, answer.body, time.monotonic() - started


async def health(serve: ServeProcess) -> int:
    async with httpx.AsyncClient(timeout=2) as client:
        return (await client.get(f"{serve.http}/health")).status_code


def code_of(body: bytes) -> str:
    code: str = json.loads(body)["error"]["code"]
    return code


async def test_half_request_lines_408_after_header_timeout_health_served(
    serve: ServeProcess,
) -> None:
    slow = [asyncio.create_task(exchange(serve.port, b"GET /hea")) for _ in range(SLOW_CLIENTS)]
    await asyncio.sleep(0.3)
    assert await health(serve) == 200  # served while the slow clients hold their sockets
    answers = await asyncio.gather(*slow)
    for status, body, seconds in answers:
        assert status == 408, body
        assert code_of(body) == "invalid_request"
        assert HEADER_TIMEOUT * 0.8 <= seconds <= HEADER_TIMEOUT + 3


async def test_silent_connection_closed_after_header_timeout(serve: ServeProcess) -> None:
    status, _, seconds = await exchange(serve.port, b"")
    assert status == 408
    assert seconds <= HEADER_TIMEOUT + 3


async def test_body_shorter_than_content_length_408(serve: ServeProcess) -> None:
    raw = (
        b"POST /v1/agents HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"name":'
    )
    answers = await asyncio.gather(*(exchange(serve.port, raw) for _ in range(10)))
    for status, body, seconds in answers:
        assert status == 408, body
        assert seconds <= 1 + 3


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"GET /health?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", id="get"),
        pytest.param(
            b"GET /v1/sts/ws?jwt=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n"
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            id="websocket-upgrade",
        ),
        pytest.param(b"GET /health?" + b"a" * 9000, id="line-not-finished"),
    ],
)
async def test_request_line_over_8kib_414(serve: ServeProcess, raw: bytes) -> None:
    status, body, _ = await exchange(serve.port, raw)
    assert status == 414, body
    assert code_of(body) == "invalid_request"


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(b"X-Big: " + b"a" * 17000 + b"\r\n", id="long-line"),
        pytest.param(b"".join(b"X-%d: a\r\n" % i for i in range(200)), id="many-lines"),
    ],
)
async def test_request_headers_too_large_431(serve: ServeProcess, headers: bytes) -> None:
    status, body, _ = await exchange(serve.port, b"GET /health HTTP/1.1\r\nHost: a\r\n" + headers)
    assert status == 431, body


async def test_websocket_upgrade_7kib_line_still_answered_401(serve: ServeProcess) -> None:
    raw = (
        b"GET /v1/sts/ws?jwt=" + b"a" * 7000 + b" HTTP/1.1\r\nHost: a\r\n"
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    status, _, _ = await exchange(serve.port, raw)
    assert status == 401


async def test_connections_over_cap_503_at_once_then_served(serve: ServeProcess) -> None:
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(MAX_CONNECTIONS + 10):
            opened.append(await asyncio.open_connection("127.0.0.1", serve.port))

        async def answer(reader: asyncio.StreamReader) -> bytes:
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(reader.read(), HEADER_TIMEOUT / 2)
            return b""

        answers = await asyncio.gather(*(answer(reader) for reader, _ in opened))
    finally:
        for _, writer in opened:
            writer.close()
    refused = [a for a in answers if a.startswith(b"HTTP/1.1 503 ")]
    assert len(refused) == 10, answers
    assert all(b"retry-after: 2" in a.lower() for a in refused)
    for _ in range(50):  # bounded: 5 s for the server to see the closes
        if await health(serve) == 200:
            break
        await asyncio.sleep(0.1)
    assert await health(serve) == 200


async def test_invalid_utf8_text_frames_close_1007_one_warning_line(serve: ServeProcess) -> None:
    assert serve.first_key is not None
    before = serve.output.read_text()

    async def send_invalid() -> int:
        async with connect(
            f"{serve.ws}/v1/sts/ws",
            additional_headers={"Authorization": f"Bearer {serve.first_key}"},
        ) as ws:
            await ws.send(b"\xff\xfe not utf-8", text=True)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
        assert closed.value.rcvd is not None
        return closed.value.rcvd.code

    codes = await asyncio.gather(*(send_invalid() for _ in range(20)))
    assert codes == [1007] * 20
    await asyncio.sleep(0.5)
    written = serve.output.read_text()[len(before) :]
    assert "Traceback" not in written
    assert "ERROR" not in written
    warnings = [line for line in written.splitlines() if "invalid UTF-8" in line]
    assert len(warnings) == 1, written
    assert warnings[0].startswith("WARNING ")
