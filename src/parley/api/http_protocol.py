"""uvicorn's HTTP/1.1 protocols, answering malformed requests with the error envelope, and
(httptools, the one `parley serve` runs) bounding what a slow or hostile client can hold.

uvicorn answers a request its parser refuses (`Content-Length: -1`, a broken request line,
oversized headers) with a text/plain "Invalid HTTP request received." before the
application sees anything. These subclasses answer the same 400, closing the connection as
uvicorn does, with API.md's body instead: `{"error": {"message", "code": "invalid_request"}}`.

Limits of the httptools protocol (`ConnectionLimits`, set by `PARLEY_HTTP_*`,
`PARLEY_MAX_CONNECTIONS` and `PARLEY_MAX_CONNECTIONS_PER_CLIENT`; docs/reliability.md):

- a request's line and headers must arrive within `header_timeout` seconds of the
  connection (or of the request's first byte on a kept-alive connection), its body within
  `body_timeout` seconds of its headers; otherwise 408 and the connection closes;
- a request line over 8 KiB is answered 414; a header line over 16 KiB, more than 128
  header lines or headers over 64 KiB in all 431 (API.md section 9). Only the head is
  measured: body bytes that arrive in the same read are the body's, whose 1 MiB limit
  answers 413 (api/middleware.py). The WebSocket handshake parser gets the same line limit;
  its own 8 KiB dropped an upgrade with a long header line without any answer;
- past `max_connections` open connections (HTTP and WebSocket) of the process, or past
  `max_connections_per_client` from one client address (the socket's peer; a trusted proxy
  has no cap of its own), a new one is answered 503 at once and closed, so no client can
  exhaust the file descriptors or take the instance offline alone.

Each refusal is logged as one rate-limited warning (`parley.api.client_faults`). A request
the application was handling when the protocol refused it (a malformed chunk, a late body)
or when its client left is noted in its scope, so the access log and `/metrics` show what
was sent, or 499, rather than 500 (`client_faults.unanswered_status`).

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
import websockets.http11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from parley.api.client_faults import CLIENT_CLOSED_REQUEST, CLIENT_FAULTS, UNANSWERED_STATUS
from parley.api.connection_limits import ConnectionLimits
from parley.api.errors import error_body
from parley.errors import InvalidRequest, ParleyError, Unavailable

HTTPTOOLS_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeHttpToolsProtocol"
H11_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeH11Protocol"

MAX_REQUEST_LINE_BYTES: Final = 8192
MAX_HEADER_LINE_BYTES: Final = 16 * 1024
MAX_HEADER_LINES: Final = 128
MAX_HEAD_BYTES: Final = 64 * 1024
_END_OF_HEAD: Final = re.compile(rb"\r?\n\r?\n")


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
TOO_MANY_FROM_CLIENT: Final = _Refusal(
    b"503 Service Unavailable",
    _envelope(Unavailable("This client has too many open connections. Try again later.")),
    "per-client connection cap reached",
    ((b"retry-after", b"2"),),
)


def check_head(head: bytes) -> _Refusal | None:
    """Return the refusal a request head (complete or not) earns, or None if it is fine.

    `head` may go on with body bytes that came in the same read: they are not measured."""
    end = _END_OF_HEAD.search(head)
    if end is not None:
        head = head[: end.start()]
    lines = head.split(b"\n")
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
        if self._client_over_cap():
            self._refuse(TOO_MANY_FROM_CLIENT)
            return
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        self._note_unanswered(CLIENT_CLOSED_REQUEST)  # unless a refusal was noted first
        super().connection_lost(exc)

    def _client_over_cap(self) -> bool:
        """Whether this connection's client address has more open than its cap allows."""
        if self.client is None or not self.limits.capped(self.client[0]):
            return False
        host, cap, count = self.client[0], self.limits.max_connections_per_client, 0
        for connection in self.connections:  # HTTP and WebSocket protocols, this one too
            client = getattr(connection, "client", None)
            if client is not None and client[0] == host:
                count += 1
                if count > cap:
                    return True
        return False

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
        # websockets parses the handshake again, each line against a module global (8 KiB
        # by default): a 16 KiB header line that `check_head` passed would be dropped there
        # without any answer, instead of reaching the application (a long token: 401).
        websockets.http11.MAX_LINE_LENGTH = MAX_HEADER_LINE_BYTES + len(b"\r\n")
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

    def _note_unanswered(self, status: int) -> None:
        """Note in the scope of a request the application has not answered what its client
        got instead (the first note stands): the access log and /metrics count that."""
        if self.cycle is not None and not self.cycle.response_started:
            cast("dict[str, Any]", self.cycle.scope).setdefault(UNANSWERED_STATUS, status)

    def _refuse(self, refusal: _Refusal) -> None:
        """Answer `refusal` with the envelope and close the connection."""
        self._cancel_timers()
        if self.transport.is_closing():
            return
        CLIENT_FAULTS.warning(refusal.fault)
        self._note_unanswered(int(refusal.status_line[:3]))
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
