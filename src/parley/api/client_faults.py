"""Client faults in the server's log: at most one warning line per kind and interval.

A malformed request, a slow client or an invalid frame is the client's fault, not the
server's: it is worth one line (the operator sees that it happens) but never a traceback or
an ERROR, and never one line per occurrence, or any client could flood the log. The first
occurrence of a kind is logged at once; later ones within `INTERVAL_SECONDS` are counted,
and the next line logged says how many were left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

INTERVAL_SECONDS: Final = 10.0

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


CLIENT_FAULTS = ClientFaultLog()
"""The process's one log of client faults (protocols are built per connection)."""
