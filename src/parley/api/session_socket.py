"""An accepted WebSocket as the conversation session sees it: three callables (receive a
frame, send a frame, close) that never raise, and the close code it went away with.

Shared by the conversation socket (api/ws.py) and the carrier's media socket
(api/telephony_ws.py).
"""

from __future__ import annotations

import logging

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

log = logging.getLogger("parley.ws")


class SessionSocket:
    """The accepted socket as the session sees it; sending and closing never raise."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._gone = False
        self._disconnect_code: int | None = None

    def disconnect_code(self) -> int | None:
        """The close code the socket went away with (1001: the server is shutting down)."""
        return self._disconnect_code

    async def receive(self) -> str | bytes | None:
        """Return the next frame, or None once the peer has disconnected."""
        if self._gone:
            return None
        message = await self._websocket.receive()
        if message["type"] == "websocket.disconnect":
            self._gone = True
            self._disconnect_code = message.get("code")
            return None
        text: str | None = message.get("text")
        return text if text is not None else message.get("bytes") or b""

    async def send(self, frame: str | bytes) -> None:
        """Send one frame; a peer that has gone is noted, not raised."""
        if self._gone or self._websocket.application_state != WebSocketState.CONNECTED:
            return
        try:
            if isinstance(frame, str):
                await self._websocket.send_text(frame)
            else:
                await self._websocket.send_bytes(frame)
        except (WebSocketDisconnect, RuntimeError, OSError):
            self._gone = True

    async def close(self, code: int, reason: str) -> None:
        """Close with `code` and `reason`, once; a peer already gone is fine."""
        if self._gone or self._websocket.application_state != WebSocketState.CONNECTED:
            return
        self._gone = True
        try:
            await self._websocket.close(code, reason)
        except (WebSocketDisconnect, RuntimeError, OSError):
            log.debug("socket already gone at close")
