"""The conversation behind the WebSocket (API.md section 8), free of ASGI types.

handshake.py authenticates the handshake; frames.py defines every message; session.py is
the conversation's state machine and lifecycle; relay.py turns engine events into messages
and stored items; watchdog.py closes the socket on expiry, revocation or an end from
elsewhere.
"""

from parley.services.live.frames import (
    CLIENT_MESSAGE_TYPES,
    MAX_MESSAGE_BYTES,
    ClientFrame,
    parse_frame,
)
from parley.services.live.handshake import Handshake, open_handshake
from parley.services.live.session import (
    CONFIG_TIMEOUT_SECONDS,
    AlreadyConfigured,
    ConfigRequired,
    ConfigTimeout,
    LiveSession,
)
from parley.services.live.watchdog import WATCH_INTERVAL_SECONDS

__all__ = [
    "CLIENT_MESSAGE_TYPES",
    "CONFIG_TIMEOUT_SECONDS",
    "MAX_MESSAGE_BYTES",
    "WATCH_INTERVAL_SECONDS",
    "AlreadyConfigured",
    "ClientFrame",
    "ConfigRequired",
    "ConfigTimeout",
    "Handshake",
    "LiveSession",
    "open_handshake",
    "parse_frame",
]
