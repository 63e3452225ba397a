"""The timer of each serving instance: lease, orphans, unanswered phone calls, revocations
waiting for the store.

`housekeeping(ctx)` registers the instance (ending its previous life's and any orphaned
live conversations), runs the timer while the server runs, and retires the instance at a
clean shutdown. Each step fails on its own: a store outage skips it until the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable

from parley.errors import ParleyError
from parley.services import instances, revocations, telephony
from parley.services.context import Context

log = logging.getLogger(__name__)

TICKS_PER_LEASE = 5
"""The lease is renewed, and orphans looked for, this many times per lease."""
MAX_TICK_SECONDS = 1.0
"""Revocations waiting for the store are published at least this often."""


@contextlib.asynccontextmanager
async def housekeeping(ctx: Context) -> AsyncIterator[None]:
    """Run the instance's timer for the duration of the block (the server's lifespan)."""
    try:
        await instances.start(ctx)
    except ParleyError:
        log.warning("could not register this instance yet; the timer retries", exc_info=True)
    task = asyncio.create_task(_run(ctx), name="parley-housekeeping")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        try:
            await instances.stop(ctx)
        except ParleyError:
            log.warning("could not retire this instance; its lease will run out", exc_info=True)


async def _run(ctx: Context) -> None:
    lease_tick = ctx.instance.lease_seconds / TICKS_PER_LEASE
    tick = min(MAX_TICK_SECONDS, lease_tick)
    loop = asyncio.get_running_loop()
    next_lease = loop.time()
    while True:
        if loop.time() >= next_lease:
            next_lease = loop.time() + lease_tick
            await _step("renew the lease", instances.renew(ctx))
            await _step("end orphaned conversations", instances.end_orphans(ctx))
            await _step("end calls never streamed", telephony.end_expired_calls(ctx))
        await _step("publish waiting revocations", revocations.publish_pending(ctx))
        await asyncio.sleep(tick)


async def _step(what: str, step: Awaitable[object]) -> None:
    try:
        await step
    except ParleyError as error:
        log.warning("housekeeping could not %s: %s", what, error.code)
    except Exception:
        # The timer must outlive any bug in one step: log it and try again next tick.
        log.exception("housekeeping failed to %s", what)
