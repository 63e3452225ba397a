"""Keep credentials out of the server's own log lines (API.md section 1).

uvicorn's WebSocket protocol logs each handshake as `"WebSocket /path?query" [accepted]` on
the `uvicorn.error` logger, whatever the access-log setting, and the query string carries
`?jwt=`, `?session_token=` or `?conversation_token=` (browsers cannot send headers on a
WebSocket), and an access line a recording's signed URL (`?signature=`, API.md section
16). No uvicorn option turns that line off, so a logging filter rewrites it.
"""

from __future__ import annotations

import logging
import re

_CREDENTIAL_IN_QUERY = re.compile(
    r"([?&](?:jwt|session_token|conversation_token|api_key|signature)=)[^&\s\"']*"
)


def redact(text: str) -> str:
    """Replace the value of every credential query parameter in `text`."""
    return _CREDENTIAL_IN_QUERY.sub(r"\1[redacted]", text)


class ServerLogHygiene(logging.Filter):
    """Redact credential query strings in uvicorn's lines, and drop its false alarm about
    refused handshakes.

    uvicorn's websockets-sansio protocol sends the `websocket.http.response` denial
    correctly but then logs "ASGI callable returned without completing handshake", since it
    counts only an accepted or closed socket as complete. A refused handshake is Parley's
    normal answer to a bad credential (API.md section 8), not a server error.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "returned without completing handshake" in message:
            return False
        if "=" in message:
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


SERVER_LOG_HYGIENE = ServerLogHygiene()


def install() -> None:
    """Attach the filter to uvicorn's loggers (adding it twice is a no-op)."""
    for name in ("uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).addFilter(SERVER_LOG_HYGIENE)
