"""A uvicorn WebSocket protocol subclass: "going away" (1001) when the server shuts down,
and one log line a handshake.

On SIGTERM uvicorn closes every open WebSocket with 1012 ("service restart") before the
application hears of it. A conversation's client should hear 1001 ("going away": the
server is stopping), as RFC 6455 section 7.4.1 defines for a server going down; the
application then sees the disconnect and ends the conversation (status `ended`) before
the process exits. `parley serve` selects this protocol by import string, as it does the
HTTP one, so every worker process loads it.

uvicorn and the websockets library log every handshake at INFO on `uvicorn.error`
(`"WebSocket /path?query" [accepted]`, "connection open", "connection closed"), beside
Parley's own access line (api/middleware.py), which has the status, the time taken and the
request ID: three or four records a socket, about a tenth of a handshake's CPU
(docs/performance.md). Here both log through `WarningsAndErrors`, which drops the rest
before a record is made. (A logger level would not hold: uvicorn's `dictConfig` resets
the levels of `uvicorn.error`'s children.)
"""

from __future__ import annotations

import logging
from typing import Any, Final, cast

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from parley.api.client_faults import CLIENT_FAULTS
from parley.services.endings import CloseCode

WS_PROTOCOL: Final = "parley.api.uvicorn_ws:UvicornWebSocketProtocol"
GOING_AWAY: Final = CloseCode.GOING_AWAY
SHUTDOWN_REASON: Final = "server shutting down"
INVALID_DATA: Final = CloseCode.INVALID_DATA
INVALID_UTF8_REASON: Final = "invalid UTF-8 in a text frame"


class WarningsAndErrors(logging.LoggerAdapter[logging.Logger]):
    """A logger's warnings and errors; its INFO and DEBUG calls cost one comparison."""

    level = logging.WARNING  # uvicorn reads it to decide its TRACE lines

    def isEnabledFor(self, level: int) -> bool:
        return level >= logging.WARNING and self.logger.isEnabledFor(level)


_LOG: Final = cast(logging.Logger, WarningsAndErrors(logging.getLogger("uvicorn.error")))


class UvicornWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O websockets protocol; shutdown closes open sockets with 1001,
    invalid UTF-8 closes with 1007 and one rate-limited warning, and only warnings and
    errors are logged (the access line covers each handshake)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = _LOG
        self.conn.logger = _LOG

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text" and not self.close_sent:
            try:
                b"".join(self.frames).decode()
            except UnicodeDecodeError:
                self.frames = []
                CLIENT_FAULTS.warning("invalid UTF-8 in a WebSocket text frame")
                self.conn.send_close(INVALID_DATA, INVALID_UTF8_REASON)
                self.handle_parser_exception()
                return
        super().send_receive_event_to_app()

    def shutdown(self) -> None:
        if self.close_sent or not self.handshake_complete:
            super().shutdown()
            return
        self.stop_keepalive()
        self.queue.put_nowait({"type": "websocket.disconnect", "code": GOING_AWAY})
        self.conn.send_close(GOING_AWAY, SHUTDOWN_REASON)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.transport.close()
