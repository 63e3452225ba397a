"""Time, injected: the only module that reads the wall clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """A source of time; services and the JWT kernel receive one instead of reading time."""

    def time(self) -> float:
        """Return the current Unix time in seconds."""
        ...

    def monotonic(self) -> float:
        """Return a monotonic reading in seconds, for measuring intervals."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


def utcnow(clock: Clock) -> datetime:
    """Return the clock's time as an aware UTC datetime."""
    return datetime.fromtimestamp(clock.time(), tz=UTC)


def isoformat(moment: datetime) -> str:
    """Format an aware datetime as ISO 8601 UTC with a `Z` suffix (API.md section 0)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def isoformat_or_none(moment: datetime | None) -> str | None:
    """`isoformat(moment)`, or None for a moment that has not happened."""
    return isoformat(moment) if moment is not None else None
