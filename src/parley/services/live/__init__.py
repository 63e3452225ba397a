"""The conversation behind a socket (API.md section 8), free of ASGI types and of wires.

handshake.py authenticates the handshake; codec.py is the seam between the session and a
wire (events in, messages out, the `Codec` Protocol), which the wires of `parley.wires`
implement (the session never imports one: an import contract); session.py is the
conversation's state machine and lifecycle; relay.py turns engine events into messages and
stored items; tools.py runs tool calls; watchdog.py closes the socket on expiry, revocation or
an end from elsewhere; call.py opens and abandons a phone call's conversation.
"""

from parley.services.live.codec import MAX_FRAME_BYTES, Codec
from parley.services.live.handshake import Handshake, open_handshake
from parley.services.live.session import (
    CONFIG_TIMEOUT_SECONDS,
    AlreadyConfigured,
    ConfigRequired,
    ConfigTimeout,
    LiveSession,
)
from parley.services.live.watchdog import WATCH_INTERVAL_SECONDS

MAX_MESSAGE_BYTES = MAX_FRAME_BYTES
"""A frame over 1 MiB closes the socket with 1009 (the server's own frame cap too)."""

__all__ = [
    "CONFIG_TIMEOUT_SECONDS",
    "MAX_MESSAGE_BYTES",
    "WATCH_INTERVAL_SECONDS",
    "AlreadyConfigured",
    "Codec",
    "ConfigRequired",
    "ConfigTimeout",
    "Handshake",
    "LiveSession",
    "open_handshake",
]
