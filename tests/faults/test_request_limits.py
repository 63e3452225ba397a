"""API.md section 9's limits, on a real `parley serve` over raw sockets (issue #38 items 1, 2
and 8).

Only the head counts against the head limits: a 77 KB body sent with its headers is served,
a body over 1 MiB is 413. A credential over 8 KiB is the verifier's 401 `invalid_token`, on
REST and on the WebSocket handshake, since a header line may be 16 KiB. One client address
cannot hold more than its share of the connections. A request the server refused mid-body
(400 malformed, 408 late) or whose client left (499) is logged and counted as that, never as
a 500 that was never sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from tests.faults.raw_http import Connection, connect, converse, exchange
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

PER_CLIENT = 10
CAPPED = "127.0.0.3"  # only the cap's tests connect from these two
PROXY = "127.0.0.4"
KIB = 1024
BODY_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    process = ServeProcess(
        tmp_path_factory.mktemp("request-limits"),
        PARLEY_DATABASE_URL="sqlite:///parley.db",
        PARLEY_METRICS="true",
        PARLEY_LOG_LEVEL="info",  # the access log's lines
        PARLEY_MAX_CONNECTIONS_PER_CLIENT=str(PER_CLIENT),
        PARLEY_TRUSTED_PROXIES=PROXY,
        PARLEY_HTTP_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT),
    )
    try:
        process.start()
        yield process
    finally:
        process.ensure_stopped()


def request(serve: ServeProcess, head: str, body: bytes = b"") -> bytes:
    """A request with the server's API key, closing the connection after its answer."""
    assert serve.first_key is not None
    return (
        f"{head}\r\nHost: a\r\nAuthorization: Bearer {serve.first_key}\r\n"
        "Connection: close\r\n".encode()
        + (b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body) if body else b"")
        + b"\r\n"
        + body
    )


def agent(variables: int, size: int) -> bytes:
    """An agent to create, with `variables` template variables of `size` characters."""
    defaults = {f"v{i}": {"default_value": "a" * size} for i in range(variables)}
    name = f"limits-{uuid.uuid4().hex[:12]}"
    return json.dumps({"name": name, "template_variables": defaults}).encode()


# --- item 1: the head is measured alone ------------------------------------------------


async def test_head_limit_counts_no_body_bytes_77_kb_agent_201(serve: ServeProcess) -> None:
    body = agent(40, 1900)
    assert 64 * KIB < len(body) < 1024 * KIB
    answer = await exchange(serve.port, request(serve, "POST /v1/agents HTTP/1.1", body))
    assert answer.status == 201, answer.body
    assert len(json.loads(answer.body)["agent"]["template_variables"]) == 40


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_body_over_1_mib_with_headers_413_envelope(serve: ServeProcess, framing: str) -> None:
    body = b'{"name": "' + b"a" * (1100 * KIB) + b'"}'
    if framing == "content-length":
        raw = request(serve, "POST /v1/agents HTTP/1.1", body)
    else:
        head = request(serve, "POST /v1/agents HTTP/1.1").removesuffix(b"\r\n")
        raw = head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    answer = await exchange(serve.port, raw)
    assert answer.status == 413, answer.body
    assert answer.headers["content-type"] == "application/json"
    assert json.loads(answer.body) == {
        "error": {"message": "The request body is larger than 1 MiB.", "code": "payload_too_large"}
    }


# --- item 2: header lines of 16 KiB, credentials of 8 KiB ------------------------------

HEALTH = b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"


async def test_header_line_of_15_kib_served(serve: ServeProcess) -> None:
    answer = await exchange(serve.port, HEALTH + b"X-Big: " + b"a" * (15 * KIB) + b"\r\n\r\n")
    assert answer.status == 200, answer.body


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(b"X-Big: " + b"a" * (17 * KIB) + b"\r\n", id="line-of-17-kib"),
        pytest.param(
            b"".join(b"X-%d: " % i + b"a" * (15 * KIB) + b"\r\n" for i in range(5)),
            id="head-over-64-kib",
        ),
    ],
)
async def test_header_line_over_16_kib_or_head_over_64_kib_431(
    serve: ServeProcess, headers: bytes
) -> None:
    answer = await exchange(serve.port, HEALTH + headers + b"\r\n")
    assert answer.status == 431, answer.body
    assert answer.code == "invalid_request"


TOKENS = [
    pytest.param("parley_sk_" + "a" * (9 * KIB), id="opaque"),
    pytest.param("e30." + "a" * (9 * KIB) + ".sig", id="jwt"),
]


@pytest.mark.parametrize("token", TOKENS)
async def test_token_over_8_kib_401_invalid_token(serve: ServeProcess, token: str) -> None:
    raw = f"GET /v1/agents HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\n"
    answer = await exchange(serve.port, raw.encode() + b"Connection: close\r\n\r\n")
    assert answer.status == 401, answer.body
    assert answer.code == "invalid_token"
    assert answer.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("token", TOKENS)
async def test_websocket_token_over_8_kib_401_invalid_token(
    serve: ServeProcess, token: str
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with ws_connect(
            f"{serve.ws}/v1/sts/ws", additional_headers={"Authorization": f"Bearer {token}"}
        ):
            pass
    response = refused.value.response
    assert response.status_code == 401
    assert json.loads(response.body)["error"]["code"] == "invalid_token"
    assert response.headers["WWW-Authenticate"] == "Bearer"


# --- item 8: one client address cannot hold every connection --------------------------


async def health_on(connection: Connection) -> int:
    return (await converse(connection, HEALTH + b"\r\n")).status


async def test_connections_per_client_past_cap_503_other_address_served(
    serve: ServeProcess,
) -> None:
    held = [await connect(serve.port, source=CAPPED) for _ in range(PER_CLIENT)]
    try:
        over = [await exchange(serve.port, b"", source=CAPPED) for _ in range(5)]
        assert [answer.status for answer in over] == [503] * 5
        assert all(answer.headers["retry-after"] == "2" for answer in over)
        assert over[0].code == "service_unavailable"
        assert (await exchange(serve.port, HEALTH + b"\r\n", source="127.0.0.2")).status == 200
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"{serve.http}/health")).status_code == 200
        # The idle sockets within the cap were kept, and are served.
        assert [await health_on(connection) for connection in held] == [200] * PER_CLIENT
    finally:
        for _, writer in held:
            writer.close()
    deadline = time.monotonic() + 5  # the server sees the closes
    while (status := (await exchange(serve.port, HEALTH + b"\r\n", source=CAPPED)).status) != 200:
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.05)


async def test_connections_per_client_trusted_proxy_not_capped(serve: ServeProcess) -> None:
    held = [await connect(serve.port, source=PROXY) for _ in range(PER_CLIENT + 5)]
    try:
        assert [await health_on(connection) for connection in held] == [200] * (PER_CLIENT + 5)
    finally:
        for _, writer in held:
            writer.close()


# --- item 8: what was sent is what is counted ------------------------------------------

UNMATCHED_POST = re.compile(
    r'^parley_http_requests_total\{method="POST",route="unmatched",status="(\d+)"\} (\S+)$', re.M
)


async def unmatched_posts(serve: ServeProcess) -> dict[int, float]:
    """POSTs answered before routing (the body was never whole), by status."""
    async with httpx.AsyncClient(timeout=5) as client:
        text = (await client.get(f"{serve.http}/metrics")).text
    return {int(status): float(count) for status, count in UNMATCHED_POST.findall(text)}


async def counted_after(serve: ServeProcess, before: dict[int, float]) -> dict[int, float]:
    """Wait (bounded) for a new unmatched POST to be counted; return the counts that grew."""
    deadline = time.monotonic() + 10
    while True:
        now = await unmatched_posts(serve)
        grown = {status: n - before.get(status, 0) for status, n in now.items()}
        if grown := {status: n for status, n in grown.items() if n}:
            return grown
        assert time.monotonic() < deadline, "the request was never counted"
        await asyncio.sleep(0.05)


async def test_malformed_chunked_body_counted_and_logged_400_not_500(
    serve: ServeProcess,
) -> None:
    before = await unmatched_posts(serve)
    log_start = len(serve.output.read_text())
    head = request(serve, "POST /v1/agents HTTP/1.1").removesuffix(b"\r\n")
    answer = await exchange(serve.port, head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n")
    assert (answer.status, answer.code) == (400, "invalid_request")
    assert await counted_after(serve, before) == {400: 1}
    logged = serve.output.read_text()[log_start:]
    assert '"POST /v1/agents" 400 ' in logged, logged
    assert '"POST /v1/agents" 500 ' not in logged


async def test_client_gone_mid_body_counted_and_logged_499_not_500(serve: ServeProcess) -> None:
    before = await unmatched_posts(serve)
    log_start = len(serve.output.read_text())
    raw = request(serve, "POST /v1/agents HTTP/1.1", b'{"name": "never finished"}')
    _, writer = await connect(serve.port)
    writer.write(raw[:-10])  # the head and part of the body; then the client goes
    await writer.drain()
    writer.close()
    await writer.wait_closed()
    assert await counted_after(serve, before) == {499: 1}
    logged = serve.output.read_text()[log_start:]
    assert '"POST /v1/agents" 499 ' in logged, logged
    assert '"POST /v1/agents" 500 ' not in logged


async def test_body_late_counted_and_logged_408_not_500(serve: ServeProcess) -> None:
    before = await unmatched_posts(serve)
    log_start = len(serve.output.read_text())
    raw = request(serve, "POST /v1/agents HTTP/1.1", b'{"name": "never finished"}')
    answer = await exchange(serve.port, raw[:-10], within=BODY_TIMEOUT + 5)
    assert (answer.status, answer.code) == (408, "invalid_request")
    assert await counted_after(serve, before) == {408: 1}
    logged = serve.output.read_text()[log_start:]
    assert '"POST /v1/agents" 408 ' in logged, logged
    assert '"POST /v1/agents" 500 ' not in logged
