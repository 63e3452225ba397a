"""The instance's webhook sender: the delivery worker in a process of its own.

Under `parley serve` the serving workers do not send webhooks: a commit claims its
deliveries in the sender's name and rings it (services/outbox_bell.py, stores/doorbell.py);
the sender, started and restarted by `parley serve` (cli/webhook_sender.py), picks them up
from the database, sends them, records the attempts, polls the shared outbox and prunes it.
So a delivery costs a serving worker its outbox row and one datagram, and sending runs on
another core (docs/webhooks.md, docs/performance.md). `create_app` alone (the tests' way)
keeps the worker in the serving process.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from parley.clock import Clock
from parley.composition.context import open_context
from parley.composition.heap import freeze_startup_heap
from parley.composition.options import RuntimeOptions
from parley.services.context import Context
from parley.services.outbox_bell import PICK_UP, POLL
from parley.services.webhook_delivery import WorkerOptions, delivery_worker
from parley.stores.doorbell import Doorbell, listening

SENDER_VARIABLE = "_PARLEY_WEBHOOK_SENDER"
"""Set by `parley serve` for its workers: where the sender listens and its name. Not a
setting (no `PARLEY_` prefix): the operator never sets it."""
SENDER_SUFFIX = "/webhooks"


@dataclass(frozen=True, slots=True)
class SenderAddress:
    """How a serving worker reaches the sender: its doorbell and the name it claims under."""

    socket: Path
    claimer: str

    @classmethod
    def for_instance(cls, instance: str, socket: Path) -> SenderAddress:
        """The sender of `instance` (its name survives a restart of the instance, so a new
        sender releases what its previous life held)."""
        return cls(socket=socket, claimer=f"{instance[: 128 - len(SENDER_SUFFIX)]}{SENDER_SUFFIX}")

    def to_environment(self) -> dict[str, str]:
        return {SENDER_VARIABLE: json.dumps({"socket": str(self.socket), "claimer": self.claimer})}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> SenderAddress | None:
        value = environ.get(SENDER_VARIABLE)
        if not value:
            return None
        fields = json.loads(value)
        return cls(socket=Path(fields["socket"]), claimer=str(fields["claimer"]))


@asynccontextmanager
async def handing_to_sender(ctx: Context, address: SenderAddress) -> AsyncIterator[None]:
    """For the block, hand this serving process's deliveries to the sender."""
    doorbell = Doorbell(address.socket)
    ctx.outbox_bell.hand_to_sender(address.claimer, doorbell.ring)
    try:
        yield
    finally:
        ctx.outbox_bell.stop_taking()
        doorbell.close()


async def run_sender(
    options: RuntimeOptions,
    address: SenderAddress,
    *,
    clock: Clock,
    retry_schedule: tuple[int, ...],
    stop: asyncio.Event,
    freeze_heap: bool = False,
) -> None:
    """Serve as the sender at `address` until `stop` is set (the doorbell first, so that no
    ring of a commit made while the worker starts is lost); `freeze_heap` once started, as
    a server process (composition/heap.py)."""
    async with AsyncExitStack() as stack:
        ctx = await stack.enter_async_context(
            open_context(
                replace(options, instance_id=address.claimer, notices_redis_loss=False),
                clock=clock,
            )
        )
        bell = ctx.outbox_bell

        def on_ring(kind: str) -> None:
            bell.ring(poll=kind == POLL, pick_up=kind == PICK_UP)

        await stack.enter_async_context(listening(address.socket, on_ring))
        worker = WorkerOptions(retry_schedule=retry_schedule, picks_up=True)
        await stack.enter_async_context(delivery_worker(ctx, worker))
        if freeze_heap:
            freeze_startup_heap()
        await stop.wait()
