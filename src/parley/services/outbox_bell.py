"""The link between the transactions that write webhook deliveries and the worker that
sends them (services/webhook_delivery.py).

After a commit that wrote deliveries the bell rings, so the worker wakes at once instead of
at its next poll. While a worker takes hand-overs (`claimer` is set), a transaction claims
the rows it writes for that worker and hands them over after the commit: they are sent
without a claim transaction of their own (the lowest lag). The worker is either

- this process's own (`take_here`): the deliveries travel in memory, bounded per webhook
  (`HANDOFF_BACKLOG`), so a slow endpoint's rows go back to the shared outbox, where any
  instance claims them, instead of waiting here past their lease; or
- the instance's webhook sender, a process of its own beside the serving workers
  (`hand_to_sender`, composition/webhook_sender.py): the rows are claimed in its name and a
  ring tells it to pick them up from the database, where it applies the same bound. A ring
  that is lost costs the sender's next poll, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Final

from parley.records import DueDelivery

HANDOFF_BACKLOG: Final = 8
"""Deliveries of one webhook that may wait in a worker, handed over, not yet sent."""

PICK_UP: Final = "pick-up"
"""A sender's ring: deliveries were claimed in its name (sender -> `ring(pick_up=True)`)."""
POLL: Final = "poll"
"""A sender's ring: a delivery was made due in the shared outbox (`ring(poll=True)`)."""


class OutboxBell:
    """Wakes the worker, and carries the deliveries handed over to it.

    Created with the services' Context, used on the event loop that serves: an
    `asyncio.Event` binds to the loop only when first awaited.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._poll = False
        self._pick_up = False
        self._handed: list[DueDelivery] = []
        self._backlog: Counter[str] = Counter()
        self._sender: Callable[[str], object] | None = None
        self.claimer: str | None = None
        """The instance name hand-overs are claimed for; None: nobody takes them."""

    @property
    def taking(self) -> bool:
        """Whether a worker takes hand-overs (this process's, or the sender process)."""
        return self.claimer is not None

    def take_here(self, claimer: str) -> None:
        """This process's worker, running as `claimer`, takes the hand-overs."""
        self.claimer, self._sender = claimer, None

    def hand_to_sender(self, claimer: str, ring: Callable[[str], object]) -> None:
        """The sender process named `claimer` takes the hand-overs; `ring(PICK_UP | POLL)`
        reaches it (without waiting, whatever happens to the ring)."""
        self.claimer, self._sender = claimer, ring

    def stop_taking(self) -> None:
        """Nobody takes hand-overs: deliveries wait in the shared outbox for any claim."""
        self.claimer, self._sender = None, None

    def ring(self, *, poll: bool = False, pick_up: bool = False) -> None:
        """Wake the worker (a no-op while it is awake already); with `poll`, make it look
        at the shared outbox at once (a delivery made due there); with `pick_up`, at the
        deliveries claimed in its name (a sender's ring). Forwarded to the sender, if any."""
        if self._sender is not None:
            if poll:
                self._sender(POLL)
            return
        self._poll = self._poll or poll
        self._pick_up = self._pick_up or pick_up
        self._event.set()

    def take_poll(self) -> bool:
        """Whether a ring asked for a look at the outbox since the last call."""
        poll, self._poll = self._poll, False
        return poll

    def take_pick_up(self) -> bool:
        """Whether a ring asked for a look at the claimed deliveries since the last call."""
        pick_up, self._pick_up = self._pick_up, False
        return pick_up

    async def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a ring; return whether one came. Clears the bell."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._event.wait()
        rung = self._event.is_set()
        self._event.clear()
        return rung

    def accepts(self, webhook_id: str) -> bool:
        """Whether a delivery to `webhook_id` may be claimed for the worker and handed over
        (a sender bounds its backlog itself, when it picks the deliveries up)."""
        if self._sender is not None:
            return True
        return self.taking and self._backlog[webhook_id] < HANDOFF_BACKLOG

    def hand_over(self, deliveries: Iterable[DueDelivery]) -> None:
        """Give committed, already claimed deliveries to the worker, and wake it."""
        if self._sender is not None:
            self._sender(PICK_UP)
            return
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
