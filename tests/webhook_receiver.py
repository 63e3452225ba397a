"""A real HTTP server on 127.0.0.1 that receives webhook calls, for any test that sends them.

It records every request (method, path, query, headers, body) and answers from a script of
`Reply` values, one per request (the last one repeats): a status and body, a delay, a
redirect, a 10 MB body (declared or streamed until close), or bytes that are not JSON.
`loopback_internet` makes an httpx client on which chosen public addresses are served by
127.0.0.1, for tests of the address policy that must not leave the machine.

    with running_receiver() as receiver:
        receiver.script(Reply.json({"ok": True}))
        ... call receiver.url("/hook") ...
        (request,) = receiver.requests
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpcore
import httpx

TEN_MB = 10 * 1024 * 1024
_CHUNK = b"x" * 65_536


@dataclass(frozen=True, slots=True)
class Reply:
    """How the receiver answers one request."""

    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay_s: float = 0.0
    """Wait this long before answering (cut short when the server stops)."""
    stream_bytes: int = 0
    """Send this many filler bytes instead of `body`."""
    declare_length: bool = True
    """Send Content-Length; without it a streamed body runs until the connection closes."""

    @classmethod
    def json(cls, value: Any, status: int = 200, *, delay_s: float = 0.0) -> Reply:
        return cls(status=status, body=json.dumps(value).encode(), delay_s=delay_s)

    @classmethod
    def text(cls, text: str, status: int = 200) -> Reply:
        return cls(status=status, body=text.encode(), headers={"Content-Type": "text/plain"})

    @classmethod
    def garbage(cls) -> Reply:
        return cls(body=b"\xff\xfe<not json>", headers={"Content-Type": "application/json"})

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Reply:
        return cls(status=status, body=b"", headers={"Location": location})

    @classmethod
    def huge(cls, size: int = TEN_MB, *, declare_length: bool = True) -> Reply:
        return cls(stream_bytes=size, declare_length=declare_length)


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """One request as the receiver saw it (header names lower-case)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookReceiver(ThreadingHTTPServer):
    """The server; use `running_receiver()` to start and stop it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ReceivedRequest] = []
        self.stopping = threading.Event()
        self.bytes_sent = 0
        self._replies: list[Reply] = [Reply()]
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        port: int = self.server_address[1]
        return port

    def url(self, path: str = "/hook") -> str:
        """The http URL of `path` on this receiver."""
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order; the last one repeats."""
        with self._lock:
            self._replies = list(replies) or [Reply()]

    def _record(self, request: ReceivedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._replies.pop(0) if len(self._replies) > 1 else self._replies[0]


class _Handler(BaseHTTPRequestHandler):
    server: WebhookReceiver

    def log_message(self, *_args: object) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        reply = self.server._record(
            ReceivedRequest(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query, keep_blank_values=True),
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
            )
        )
        if reply.delay_s and self.server.stopping.wait(reply.delay_s):
            return
        try:
            self._answer(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a cap or a timeout): what the tests expect

    def _answer(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        size = reply.stream_bytes or len(reply.body)
        if reply.declare_length:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        if not reply.stream_bytes:
            self.wfile.write(reply.body)
            self.server.bytes_sent += len(reply.body)
            return
        sent = 0
        while sent < reply.stream_bytes and not self.server.stopping.is_set():
            piece = _CHUNK[: reply.stream_bytes - sent]
            self.wfile.write(piece)
            sent += len(piece)
            self.server.bytes_sent += len(piece)


@contextmanager
def running_receiver() -> Iterator[WebhookReceiver]:
    """A receiver serving on a thread; stopped (and its port closed) afterwards."""
    receiver = WebhookReceiver()
    thread = threading.Thread(target=receiver.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        receiver.shutdown()
        receiver.server_close()
        thread.join(5)


class _ToLoopback(httpcore.AsyncNetworkBackend):
    """Connects to 127.0.0.1 (same port) whenever a `public` address is asked for; refuses
    any other address but loopback, so no test traffic ever leaves the machine."""

    def __init__(self, public: set[str]) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._public = public
        self.connected: list[str] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connected.append(host)
        if host in self._public:
            host = "127.0.0.1"
        elif host != "127.0.0.1":
            raise httpcore.ConnectError(f"tests stay on loopback, not {host}")
        return await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("no unix sockets here")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def loopback_internet(*public: str) -> tuple[httpx.AsyncClient, list[str]]:
    """An httpx client on which the `public` addresses are served by 127.0.0.1 (same port):
    a real socket, a real server, and an address the policy takes for the internet. Also
    returns the list of addresses it connected to, in order."""
    backend = _ToLoopback(set(public))
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # httpx exposes no network backend: its pool is replaced by one that has ours.
    transport._pool = httpcore.AsyncConnectionPool(
        network_backend=backend, max_keepalive_connections=0
    )
    return httpx.AsyncClient(transport=transport, trust_env=False), backend.connected


async def requests_reach(receiver: WebhookReceiver, count: int, seconds: float = 30) -> None:
    """Wait until the receiver has `count` requests; fail after `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if len(receiver.requests) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{len(receiver.requests)} requests, not {count}, in {seconds} s")


async def only_delivery(client: httpx.AsyncClient, webhook_id: str) -> dict[str, Any]:
    """The webhook's one delivery, once it reads `delivered` (its state after 5 s if not)."""
    for _ in range(100):
        listed = await client.get(f"/v1/webhooks/{webhook_id}/deliveries")
        (delivery,) = listed.json()["deliveries"]
        if delivery["status"] == "delivered":
            break
        await asyncio.sleep(0.05)
    return cast(dict[str, Any], delivery)
