"""`/v1/telephony/twilio/media`: a phone call's Twilio media stream (API.md section 13).

The carrier sends no credential on the handshake, so the socket is accepted and its opening
frames are the handshake: `connected`, then within 10 s a `start` whose `customParameters`
carry a valid, unused stream token for their `conversation_id` (redeemed once, by
`authn.authenticate_stream`). Anything else closes 1008 and nothing starts (1011 when the
stores do not answer). Then
`services.live.LiveSession` runs the call with the stream's `TwilioCodec`, opened by the
config of the pending conversation: the session holds every other rule (leases, the
disabled-agent rule, ending in one place, the watchdog), as on the conversation socket.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter, WebSocket

from parley.api.deps import context_of
from parley.api.session_socket import SessionSocket
from parley.engine import EngineFactory
from parley.errors import InvalidRequest, ParleyError, Unavailable
from parley.services import authn, live
from parley.services.endings import CloseCode
from parley.services.live.call import abandon_call, open_call, with_call_settings
from parley.wires.twilio_codec import (
    IDLE_FRAME,
    Connected,
    StreamStart,
    TwilioCodec,
    call_configure,
    parse_opening,
)

log = logging.getLogger("parley.telephony")
router = APIRouter()

START_TIMEOUT_SECONDS = 10.0
IDLE_SECONDS = 0.25
"""With no frame for this long the codec is handed IDLE_FRAME (the DTMF pause runs on)."""
MAX_OPENING_BYTES = 16 * 1024
"""`connected` and `start` are well under 2 KiB."""


@router.websocket("/v1/telephony/twilio/media")
async def media_socket(websocket: WebSocket) -> None:
    """Accept, authenticate the stream by its `start`, and run the call until it ends."""
    ctx = context_of(websocket)
    await websocket.accept()
    socket = _Socket(websocket)
    try:
        start = await asyncio.wait_for(_opening(socket), START_TIMEOUT_SECONDS)
        stream = await authn.authenticate_stream(
            ctx, conversation_id=start.conversation_id, stream_token=start.stream_token
        )
        handshake = await open_call(ctx, stream)
    except TimeoutError:
        log.info("media stream refused: no start within %.0f s", START_TIMEOUT_SECONDS)
        await socket.close(CloseCode.POLICY_VIOLATION, "no start")
        return
    except Unavailable:
        await socket.close(CloseCode.INTERNAL_ERROR, "unavailable")
        return
    except ParleyError as error:
        log.info("media stream refused: %s", error.code)  # never the token itself
        await socket.close(CloseCode.POLICY_VIOLATION, error.code)
        return
    wire = TwilioCodec(stream_sid=start.stream_sid, clock=ctx.clock)
    factory: EngineFactory = websocket.app.state.engine_factory
    session = live.LiveSession(
        ctx,
        factory,
        handshake,
        wire,
        send=socket.send,
        close=socket.close,
        disconnect_code=socket.disconnect_code,
    )
    configure = with_call_settings(call_configure(), stream.conversation)
    await session.run(socket.receive_or_idle, opening=(configure,))
    if session.conversation_id is None:  # refused before going live (a disabled agent)
        try:
            await abandon_call(
                ctx, org_id=handshake.principal.org_id, conversation_id=start.conversation_id
            )
        except ParleyError:
            log.exception("could not end call %s that never went live", start.conversation_id)


async def _opening(socket: _Socket) -> StreamStart:
    """Read `connected`, then `start`; raise InvalidRequest for anything else."""
    for expected in (Connected, StreamStart):
        data = await socket.receive()
        if data is None or len(data) > MAX_OPENING_BYTES:
            raise InvalidRequest("The stream ended or sent too much before its start.")
        found = parse_opening(data)
        if not isinstance(found, expected):
            raise InvalidRequest("Expected `connected`, then `start`.")
        if isinstance(found, StreamStart):
            return found
    raise AssertionError("unreachable")


class _Socket(SessionSocket):
    """The media socket: the session's socket, and a read that yields IDLE_FRAME when the
    carrier is silent (the codec's DTMF pause and the flood meter need the clock to tick)."""

    def __init__(self, websocket: WebSocket) -> None:
        super().__init__(websocket)
        self._next: asyncio.Task[str | bytes | None] | None = None

    async def receive_or_idle(self) -> str | bytes | None:
        """Return the next frame, or IDLE_FRAME when none came within IDLE_SECONDS (the
        pending read goes on: no frame is lost)."""
        if self._next is None:
            self._next = asyncio.ensure_future(self.receive())
        done, _ = await asyncio.wait({self._next}, timeout=IDLE_SECONDS)
        if not done:
            return IDLE_FRAME
        task, self._next = self._next, None
        return task.result()

    async def close(self, code: int, reason: str) -> None:
        if self._next is not None:
            self._next.cancel()
        await super().close(code, reason)
