"""ASGI middleware: the body size limit and an access log that never shows a query string."""

from __future__ import annotations

import json
import logging
import re
import secrets
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from parley.api.client_faults import unanswered_status
from parley.errors import PayloadTooLarge

MAX_BODY_BYTES = 1024 * 1024
"""API.md section 9: request bodies are at most 1 MiB."""

access_log = logging.getLogger("parley.access")

REQUEST_ID_HEADER = b"x-request-id"
_REQUEST_ID_SHAPE = re.compile(rb"[A-Za-z0-9._:-]{1,64}")


class BodyLimitMiddleware:
    """Refuse request bodies over the limit with 413, by header or by what arrives.

    The body is read here, up to the limit, before the app sees it: frameworks turn errors
    raised while they read a body into their own 400, so the limit cannot be enforced from
    inside their read. Bodies are at most 1 MiB, so buffering them costs little.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _send_413(send)
            return
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left (or was cut off) mid-body: no one to answer
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await _send_413(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """Return a receive callable that yields `messages` first, then defers to `receive`."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class AccessLogMiddleware:
    """Log one line per request: method, path without query string, status, duration and
    request ID. A request the app did not answer shows what its client got instead (400 or
    408 sent by the HTTP protocol, 499 if the client left), 500 only if nothing is known.

    The query string is never logged: the WebSocket carries credentials there (`?jwt=`,
    `?session_token=`), and a log line must never hold a credential (API.md section 1).
    The request ID is the caller's `X-Request-ID` when it is a short plain token, else a
    fresh random one; it is in `request.state.request_id` (the audit trail records it) and
    in the response's `X-Request-ID` header.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        status = 0
        started = time.perf_counter()
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id

        async def logging_send(message: Message) -> None:
            nonlocal status
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER, request_id.encode("ascii")))
                message = {**message, "headers": headers}
            elif message["type"] == "websocket.accept":
                status = 101
            await send(message)

        try:
            await self.app(scope, receive, logging_send)
        finally:
            method = scope.get("method", "WS") if scope["type"] == "http" else "WS"
            client = scope.get("client") or ("-", 0)
            elapsed_ms = (time.perf_counter() - started) * 1000
            access_log.info(
                '%s "%s %s" %s %.1fms %s',
                client[0],
                method,
                scope["path"],
                status or unanswered_status(scope),
                elapsed_ms,
                request_id,
            )


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER and _REQUEST_ID_SHAPE.fullmatch(value):
            return bytes(value).decode("ascii")
    return secrets.token_hex(16)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_413(send: Send) -> None:
    error = PayloadTooLarge()
    body = json.dumps({"error": {"message": error.message, "code": error.code}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
