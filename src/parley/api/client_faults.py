"""Client faults in the server's log: at most one warning line per kind and interval.

A malformed request, a slow client or an invalid frame is the client's fault, not the
server's: it is worth one line (the operator sees that it happens) but never a traceback or
an ERROR, and never one line per occurrence, or any client could flood the log. The first
occurrence of a kind is logged at once; later ones within `INTERVAL_SECONDS` are counted,
and the next line logged says how many were left out.

A request the application never answered is counted and logged (api/metrics.py,
api/middleware.py) with what its client got: the refusal the HTTP protocol sent itself (400
for a malformed chunked body, 408 for a late one), 499 if the client left first (nginx's
"client closed request": nothing was sent), and 500 only otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

INTERVAL_SECONDS: Final = 10.0
UNANSWERED_STATUS: Final = "parley.unanswered_status"
"""The scope key where the HTTP protocol notes what a request's client got instead of an
answer from the application (api/http_protocol.py)."""
CLIENT_CLOSED_REQUEST: Final = 499

log = logging.getLogger("parley.clients")


class ClientFaultLog:
    """Log client faults as warnings, each kind at most once per `interval` seconds."""

    def __init__(
        self,
        logger: logging.Logger = log,
        *,
        interval: float = INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._monotonic = monotonic
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def warning(self, kind: str) -> None:
        """Note one fault of `kind` (a fixed text: it names no client input)."""
        now = self._monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return
        self._last[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if left_out:
            self._logger.warning(
                "client fault: %s (%d more in the previous %.0f s not logged)",
                kind,
                left_out,
                self._interval,
            )
        else:
            self._logger.warning("client fault: %s", kind)


def unanswered_status(scope: Mapping[str, Any]) -> int:
    """Return the status to log and count for a request that the application sent no
    answer to: the one the protocol noted, else 500 (what uvicorn then sends)."""
    noted = scope.get(UNANSWERED_STATUS)
    return noted if isinstance(noted, int) else 500


CLIENT_FAULTS = ClientFaultLog()
"""The process's one log of client faults (protocols are built per connection)."""
