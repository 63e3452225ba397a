"""ASGI middleware: the body size limit and an access log that never shows a query string."""

from __future__ import annotations

import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from parley.errors import PayloadTooLarge

MAX_BODY_BYTES = 1024 * 1024
"""API.md section 9: request bodies are at most 1 MiB."""

access_log = logging.getLogger("parley.access")


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
    """Log one line per request: method, path without query string, status, duration.

    The query string is never logged: the WebSocket carries credentials there (`?jwt=`,
    `?session_token=`), and a log line must never hold a credential (API.md section 1).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        status = 0
        started = time.perf_counter()

        async def logging_send(message: Message) -> None:
            nonlocal status
            if message["type"] in ("http.response.start", "websocket.http.response.start"):
                status = int(message["status"])
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
                '%s "%s %s" %s %.1fms', client[0], method, scope["path"], status or 500, elapsed_ms
            )


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
