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


class _BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Refuse request bodies over the limit with 413, by header or while streaming."""

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
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await _send_413(send)


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
