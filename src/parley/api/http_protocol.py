"""uvicorn's HTTP/1.1 protocols, answering malformed requests with the error envelope, and
(httptools, the one `parley serve` runs) bounding what a slow or hostile client can hold.

uvicorn answers a request its parser refuses (`Content-Length: -1`, a broken request line,
oversized headers) with a text/plain "Invalid HTTP request received." before the
application sees anything. These subclasses answer the same 400, closing the connection as
uvicorn does, with API.md's body instead: `{"error": {"message", "code": "invalid_request"}}`.

Limits of the httptools protocol (`ConnectionLimits`, set by `PARLEY_HTTP_*` and
`PARLEY_MAX_CONNECTIONS`; docs/reliability.md):

- a request's line and headers must arrive within `header_timeout` seconds of the
  connection (or of the request's first byte on a kept-alive connection), its body within
  `body_timeout` seconds of its headers; otherwise 408 and the connection closes;
- a request line over 8 KiB is answered 414; a header line over 8 KiB, more than 128
  header lines or a head over 64 KiB 431 (the limits of the WebSocket handshake parser,
  which otherwise dropped an upgrade with a long line without any answer);
- past `max_connections` open connections (HTTP and WebSocket) of the process, a new one is
  answered 503 at once and closed, so no client can exhaust the file descriptors.

Each refusal is logged as one rate-limited warning (`parley.api.client_faults`).

`parley serve` builds the protocol with `http_protocol_factory(limits)`, a picklable
callable, so every worker process gets the same limits.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Final, cast

import h11
import httptools
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from parley.api.client_faults import CLIENT_FAULTS
from parley.api.errors import error_body
from parley.errors import InvalidRequest, ParleyError, Unavailable

HTTPTOOLS_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeHttpToolsProtocol"
H11_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeH11Protocol"

MAX_REQUEST_LINE_BYTES: Final = 8192
MAX_HEADER_LINE_BYTES: Final = 8192
MAX_HEADER_LINES: Final = 128
MAX_HEAD_BYTES: Final = 64 * 1024
_END_OF_HEAD: Final = re.compile(rb"\r?\n\r?\n")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How long a client may take to send a request, and how many connections are open."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000


def _envelope(error: ParleyError) -> bytes:
    return json.dumps(error_body(error), separators=(",", ":")).encode()


MALFORMED_BODY: Final = _envelope(InvalidRequest("The HTTP request is malformed."))
_HEADERS: Final = (
    (b"content-type", b"application/json"),
    (b"content-length", str(len(MALFORMED_BODY)).encode()),
    (b"connection", b"close"),
)


@dataclass(frozen=True, slots=True)
class _Refusal:
    status_line: bytes
    body: bytes
    fault: str
    extra_headers: tuple[tuple[bytes, bytes], ...] = ()


MALFORMED: Final = _Refusal(b"400 Bad Request", MALFORMED_BODY, "malformed HTTP request")
TIMED_OUT: Final = _Refusal(
    b"408 Request Timeout",
    _envelope(InvalidRequest("The request did not arrive in time.")),
    "request not received in time",
)
LINE_TOO_LONG: Final = _Refusal(
    b"414 URI Too Long",
    _envelope(InvalidRequest("The request line is longer than 8 KiB.")),
    "request line over 8 KiB",
)
HEADERS_TOO_LARGE: Final = _Refusal(
    b"431 Request Header Fields Too Large",
    _envelope(InvalidRequest("The request's headers are too large.")),
    "request headers too large",
)
TOO_MANY_CONNECTIONS: Final = _Refusal(
    b"503 Service Unavailable",
    _envelope(Unavailable("The server has too many open connections. Try again later.")),
    "connection cap reached",
    ((b"retry-after", b"2"),),
)


def check_head(head: bytes) -> _Refusal | None:
    """Return the refusal a request head (complete or not) earns, or None if it is fine."""
    end = _END_OF_HEAD.search(head)
    lines = (head[: end.start()] if end else head).split(b"\n")
    if len(lines[0].rstrip(b"\r")) > MAX_REQUEST_LINE_BYTES:
        return LINE_TOO_LONG
    if (
        len(head) > MAX_HEAD_BYTES
        or len(lines) - 1 > MAX_HEADER_LINES
        or any(len(line.rstrip(b"\r")) > MAX_HEADER_LINE_BYTES for line in lines[1:])
    ):
        return HEADERS_TOO_LARGE
    return None


class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the envelope on refusals and `ConnectionLimits`."""

    def __init__(self, *args: Any, limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits or ConnectionLimits()
        self._head = bytearray()
        self._reading_head = True
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse(TOO_MANY_CONNECTIONS)
            return
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._reading_head:
            self._arm_header_timer()
            self._head += data
            refusal = check_head(bytes(self._head))
            if refusal is not None:
                self._refuse(refusal)
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._refuse(MALFORMED)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._head.clear()
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        if not (self.parser.should_upgrade() and self._should_upgrade()):
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)

    def on_message_complete(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._reading_head = True
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._cancel_timers()  # the WebSocket protocol owns the connection from here
        super().handle_websocket_upgrade()

    def send_400_response(self, msg: str) -> None:  # noqa: ARG002 (uvicorn's text is replaced)
        self._refuse(MALFORMED)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout, self._head_late)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _head_late(self) -> None:
        self._header_timer = None
        self._refuse(TIMED_OUT)

    def _body_late(self) -> None:
        self._body_timer = None
        if self.cycle is not None and self.cycle.response_started:
            # The application answered without reading the whole body: nothing to say.
            CLIENT_FAULTS.warning(TIMED_OUT.fault)
            self.transport.close()
            return
        self._refuse(TIMED_OUT)

    def _refuse(self, refusal: _Refusal) -> None:
        """Answer `refusal` with the envelope and close the connection."""
        self._cancel_timers()
        if self.transport.is_closing():
            return
        CLIENT_FAULTS.warning(refusal.fault)
        headers = (
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(refusal.body)).encode()),
            *refusal.extra_headers,
            (b"connection", b"close"),
        )
        head = [b"HTTP/1.1 ", refusal.status_line, b"\r\n"]
        for name, value in headers:
            head += [name, b": ", value, b"\r\n"]
        self.transport.write(b"".join([*head, b"\r\n", refusal.body]))
        self.transport.close()


def http_protocol_factory(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """Return uvicorn's `http=` for `limits`: picklable, so `--workers` processes get it."""
    return cast(
        "type[asyncio.Protocol]", functools.partial(EnvelopeHttpToolsProtocol, limits=limits)
    )


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; a request it cannot parse gets the JSON envelope."""

    def send_400_response(self, msg: str) -> None:  # noqa: ARG002 (uvicorn's text is replaced)
        headers = [*self.server_state.default_headers, *_HEADERS]
        response = h11.Response(status_code=400, headers=headers, reason=b"Bad Request")
        output = self.conn.send(response)
        self.transport.write(output or b"")
        output = self.conn.send(h11.Data(data=MALFORMED_BODY))
        self.transport.write(output or b"")
        output = self.conn.send(h11.EndOfMessage())
        self.transport.write(output or b"")
        self.transport.close()
