"""The in-process link between the transactions that write webhook deliveries and this
process's delivery worker (services/webhook_delivery.py).

After a commit that wrote deliveries the bell rings, so the worker wakes at once instead of
at its next poll. While the worker runs (`taking`), a transaction may also claim the rows
it writes for this instance and hand them over after the commit: they are sent without a
claim transaction of their own (the lowest lag). The hand-over is bounded per webhook
(`HANDOFF_BACKLOG`), so a slow endpoint's rows go back to the shared outbox, where any
instance claims them, instead of waiting here past their lease.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterable
from typing import Final

from parley.records import DueDelivery

HANDOFF_BACKLOG: Final = 8
"""Deliveries of one webhook that may wait in this process, handed over, not yet sent."""


class OutboxBell:
    """Wakes the worker, and carries the deliveries handed over to it.

    Created with the services' Context, used on the event loop that serves: an
    `asyncio.Event` binds to the loop only when first awaited.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._poll = False
        self._handed: list[DueDelivery] = []
        self._backlog: Counter[str] = Counter()
        self.taking = False
        """True while this process's worker runs and takes hand-overs."""

    def ring(self, *, poll: bool = False) -> None:
        """Wake the worker (a no-op while it is awake already); with `poll`, make it look
        at the shared outbox at once (a delivery made due there)."""
        self._poll = self._poll or poll
        self._event.set()

    def take_poll(self) -> bool:
        """Whether a ring asked for a look at the outbox since the last call."""
        poll, self._poll = self._poll, False
        return poll

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a ring; return whether one came. Clears the bell."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._event.wait()
        rung = self._event.is_set()
        self._event.clear()
        return rung

    def accepts(self, webhook_id: str) -> bool:
        """Whether a delivery to `webhook_id` may be claimed here and handed over."""
        return self.taking and self._backlog[webhook_id] < HANDOFF_BACKLOG

    def hand_over(self, deliveries: Iterable[DueDelivery]) -> None:
        """Give committed, already claimed deliveries to the worker, and wake it."""
        for due in deliveries:
            self._handed.append(due)
            self._backlog[due.webhook_id] += 1
        self.ring()

    def take(self) -> list[DueDelivery]:
        """The deliveries handed over since the last call (the worker's)."""
        handed, self._handed = self._handed, []
        return handed

    def done(self, webhook_id: str) -> None:
        """A handed-over delivery of `webhook_id` was sent (or dropped)."""
        self._backlog[webhook_id] -= 1
        if self._backlog[webhook_id] <= 0:
            del self._backlog[webhook_id]
