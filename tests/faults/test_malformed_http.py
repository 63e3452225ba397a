"""Issue #9 finding 13: a request uvicorn cannot parse gets 400 with the JSON envelope, not
uvicorn's text/plain line, on both of its HTTP/1.1 protocols; a raw socket talks to a real
server on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn

from parley.api.http_protocol import H11_PROTOCOL, HTTPTOOLS_PROTOCOL
from parley.app import create_app
from tests import databases
from tests.faults.conftest import fault_settings
from tests.faults.pg_cluster import free_port
from tests.faults.raw_http import exchange

pytestmark = pytest.mark.anyio

POST = b"POST /v1/agents HTTP/1.1\r\nHost: a\r\n"
MALFORMED = [
    pytest.param(POST + b"Content-Length: -1\r\n\r\n", id="negative-length"),
    pytest.param(POST + b"Content-Length: 1x\r\n\r\n", id="length-not-a-number"),
    pytest.param(b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n", id="header-without-colon"),
    pytest.param(b"GET /health HTTP/1.1\r\nHo\x00st: a\r\n\r\n", id="nul-in-header-name"),
    pytest.param(b"GET /he alth HTTP/1.1\r\nHost: a\r\n\r\n", id="space-in-target"),
    pytest.param(b"NOT HTTP AT ALL\r\n\r\n", id="garbage-request-line"),
]  # fmt: skip


@pytest.fixture(params=[HTTPTOOLS_PROTOCOL, H11_PROTOCOL], ids=["httptools", "h11"])
async def port(
    request: pytest.FixtureRequest, sqlite_template: Path, tmp_path: Path
) -> AsyncIterator[int]:
    app = create_app(fault_settings(databases.sqlite_copy(sqlite_template, tmp_path)))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, http=request.param, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):  # bounded: 5 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)


@pytest.mark.parametrize("raw", MALFORMED)
async def test_malformed_http_400_json_envelope(port: int, raw: bytes) -> None:
    answer = await exchange(port, raw)
    assert answer.status == 400
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    assert int(answer.headers["content-length"]) == len(answer.body)
    assert json.loads(answer.body) == {
        "error": {"message": "The HTTP request is malformed.", "code": "invalid_request"}
    }


async def test_wellformed_http_still_served(port: int) -> None:
    answer = await exchange(port, b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    assert answer.status == 200, answer.body
    assert json.loads(answer.body)["status"] == "ok"


async def test_parley_serve_malformed_http_400_json_envelope(tmp_path: Path) -> None:
    """`parley serve` itself selects the envelope protocol."""
    port = free_port()
    env = {
        **os.environ,
        "PARLEY_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "PARLEY_REDIS_URL": "",
        "PARLEY_LOG_LEVEL": "warning",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "parley", "serve", "--port", str(port),
        env=env, cwd=tmp_path, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        for _ in range(300):  # bounded: 30 s
            with contextlib.suppress(OSError):
                health = await exchange(port, b"GET /health HTTP/1.1\r\nHost: a\r\n"
                                        b"Connection: close\r\n\r\n")  # fmt: skip
                if health.status == 200:
                    break
            await asyncio.sleep(0.1)
        answer = await exchange(port, POST + b"Content-Length: -1\r\n\r\n")
        assert (answer.status, answer.headers["content-type"]) == (400, "application/json")
        assert answer.code == "invalid_request"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 15)
