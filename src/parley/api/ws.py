"""`/v1/sts/ws`: the conversation WebSocket (spec section 4.3; API.md section 8).

A refused handshake is answered as HTTP with the REST status and envelope (the ASGI
`websocket.http.response` extension, through Starlette's `send_denial_response`). Once
accepted, the socket is three callables handed to `services.live.LiveSession` (receive a
frame, send a frame, close) with the wire's codec, `wires.parley_codec.ParleyCodec`: the
session speaks events, the codec makes them this socket's JSON frames.

The route is served by Starlette alone, first in the app (`route`, api/bare_routes.py):
FastAPI's WebSocket machinery (dependency solving, an exit stack) and matching the
handshake against every REST route cost about a tenth of a handshake (docs/performance.md).
"""

from __future__ import annotations

from fastapi import WebSocket

from parley.api.bare_routes import BareWebSocketRoute
from parley.api.deps import client_address, context_of
from parley.api.errors import error_response
from parley.api.session_socket import SessionSocket
from parley.engine import EngineFactory
from parley.errors import MultipleCredentials, ParleyError
from parley.services import live
from parley.wires.parley_codec import ParleyCodec

_QUERY_CREDENTIALS = ("jwt", "session_token", "conversation_token")


async def conversation_socket(websocket: WebSocket) -> None:
    """Authenticate, accept, and run one conversation until either side closes."""
    ctx = context_of(websocket)
    query = websocket.query_params
    try:
        if any(len(query.getlist(name)) > 1 for name in _QUERY_CREDENTIALS):
            raise MultipleCredentials()
        handshake = await live.open_handshake(
            ctx,
            query_jwt=query.get("jwt"),
            query_session_token=query.get("session_token"),
            authorization=websocket.headers.getlist("authorization"),
            conversation_id=query.get("conversation_id"),
            query_conversation_token=query.get("conversation_token"),
            client=client_address(websocket),
        )
    except ParleyError as error:
        await websocket.send_denial_response(error_response(error))
        return
    await websocket.accept()
    socket = SessionSocket(websocket)
    factory: EngineFactory = websocket.app.state.engine_factory
    session = live.LiveSession(
        ctx,
        factory,
        handshake,
        ParleyCodec(),
        send=socket.send,
        close=socket.close,
        disconnect_code=socket.disconnect_code,
    )
    await session.run(socket.receive)


route = BareWebSocketRoute("/v1/sts/ws", conversation_socket)
"""The route that answers (near the app's first, before every REST route)."""
