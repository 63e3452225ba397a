"""The in-process signal that wakes the webhook worker when a commit wrote deliveries."""

from __future__ import annotations

import asyncio
import contextlib


class OutboxBell:
    """Rung after a commit that wrote deliveries; the worker waits on it between polls.

    Created with the services' Context, used on the event loop that serves: an
    `asyncio.Event` binds to the loop only when first awaited.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def ring(self) -> None:
        """Wake the worker (a no-op while it is awake already)."""
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a ring; return whether one came. Clears the bell."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._event.wait()
        rung = self._event.is_set()
        self._event.clear()
        return rung
