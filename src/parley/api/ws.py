"""`/v1/sts/ws`: the conversation WebSocket (spec section 4.3; API.md section 8).

A refused handshake is answered as HTTP with the REST status and envelope (the ASGI
`websocket.http.response` extension, through Starlette's `send_denial_response`). Once
accepted, the socket is three callables handed to `services.live.LiveSession` (receive a
frame, send a frame, close) with the wire's codec, `live.ParleyCodec`: the session speaks
events, the codec makes them this socket's JSON frames.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from parley.api.deps import context_of
from parley.api.errors import error_response
from parley.engine import EngineFactory
from parley.errors import MultipleCredentials, ParleyError
from parley.services import live

log = logging.getLogger("parley.ws")
router = APIRouter()


@router.websocket("/v1/sts/ws")
async def conversation_socket(websocket: WebSocket) -> None:
    """Authenticate, accept, and run one conversation until either side closes."""
    ctx = context_of(websocket)
    query = websocket.query_params
    try:
        if len(query.getlist("jwt")) > 1 or len(query.getlist("session_token")) > 1:
            raise MultipleCredentials()
        handshake = await live.open_handshake(
            ctx,
            query_jwt=query.get("jwt"),
            query_session_token=query.get("session_token"),
            authorization=websocket.headers.getlist("authorization"),
            conversation_id=query.get("conversation_id"),
        )
    except ParleyError as error:
        await websocket.send_denial_response(error_response(error))
        return
    await websocket.accept()
    socket = _Socket(websocket)
    factory: EngineFactory = websocket.app.state.engine_factory
    session = live.LiveSession(
        ctx,
        factory,
        handshake,
        live.ParleyCodec(),
        send=socket.send,
        close=socket.close,
        disconnect_code=socket.disconnect_code,
    )
    await session.run(socket.receive)


class _Socket:
    """The accepted socket as the session sees it; sending and closing never raise."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._gone = False
        self._disconnect_code: int | None = None

    def disconnect_code(self) -> int | None:
        """The close code the socket went away with (1001: the server is shutting down)."""
        return self._disconnect_code

    async def receive(self) -> str | bytes | None:
        """Return the next frame, or None once the client has disconnected."""
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
        if self._gone or self._websocket.application_state != WebSocketState.CONNECTED:
            return
        self._gone = True
        try:
            await self._websocket.close(code, reason)
        except (WebSocketDisconnect, RuntimeError, OSError):
            log.debug("socket already gone at close")
