"""The timer of each serving instance: lease (and the active conversations' leases on the
caps), orphans (conversations, and test runs: services/scenario_runs.py rule 3),
unanswered phone calls, revocations waiting for the store, spent `jti` records (embedded
mode), retention, recordings waiting for their store, uses of rotated API keys' replaced
secrets (to the audit trail), spent credentials (conversation tokens, replaced secrets).

`housekeeping(ctx)` registers the instance (ending its previous life's and any orphaned
live conversations), runs the timer while the server runs, and retires the instance at a
clean shutdown. Each step fails on its own: a store outage skips it until the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable

from parley.db.jti_claims import SWEEP_BATCH, DatabaseReplayGuard
from parley.errors import ParleyError
from parley.services import (
    active_conversations,
    api_keys,
    conversation_tokens,
    instances,
    outbound_calls,
    post_call,
    recordings,
    retention,
    revocations,
    scenario_runs,
    telephony,
    transfers,
)
from parley.services.context import Context

log = logging.getLogger(__name__)

TASK_NAME = "parley-housekeeping"
"""The name of the timer's task."""
TICKS_PER_LEASE = 5
"""The lease is renewed, and orphans looked for, this many times per lease."""
MAX_TICK_SECONDS = 1.0
"""Revocations waiting for the store are published at least this often."""
SWEEPS_PER_TICK = 20
"""Batches of spent `jti` records (`jti_claims.SWEEP_BATCH` each) deleted per tick at most:
10,000 a second, each batch its own short transaction, so claims interleave with them."""


STOP_SECONDS = 5.0
"""How long a stopping server waits for the timer's step under way before cancelling it."""


class Timer:
    """The instance's timer task, stopped between two steps: a database call cut short by a
    cancel can leave its connection half-made (asyncpg then reports an exception nobody
    awaits)."""

    def __init__(self, ctx: Context) -> None:
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(_run(ctx, self._stopping), name=TASK_NAME)
        self._leases = asyncio.create_task(
            _renew_leases(ctx, self._stopping), name=f"{TASK_NAME}-leases"
        )

    async def stop(self) -> None:
        """Let the step under way finish, then end; cancel it past `STOP_SECONDS`."""
        self._stopping.set()
        for task in (self._leases, self._task):
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_SECONDS)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


@contextlib.asynccontextmanager
async def housekeeping(ctx: Context) -> AsyncIterator[Timer]:
    """Run the instance's timer for the duration of the block (the server's lifespan)."""
    try:
        await instances.start(ctx)
        await scenario_runs.end_orphaned_runs(ctx, including_own=True)
    except ParleyError:
        log.warning("could not register this instance yet; the timer retries", exc_info=True)
    timer = Timer(ctx)
    try:
        yield timer
    finally:
        await timer.stop()
        await _step("audit the uses of replaced API keys", api_keys.flush_grace_uses(ctx))
        try:
            await instances.stop(ctx)
        except ParleyError:
            log.warning("could not retire this instance; its lease will run out", exc_info=True)


async def _run(ctx: Context, stopping: asyncio.Event) -> None:
    lease_tick = ctx.instance.lease_seconds / TICKS_PER_LEASE
    tick = min(MAX_TICK_SECONDS, lease_tick)
    loop = asyncio.get_running_loop()
    # The first lease's work waits a tick: the start (`housekeeping`) registered the
    # instance and ended the orphans a moment ago, and nothing else is due that soon.
    next_lease = loop.time() + lease_tick
    while not stopping.is_set():
        if loop.time() >= next_lease:
            next_lease = loop.time() + lease_tick
            await _step("renew the lease", instances.renew(ctx))
            await _step("renew the active conversations' leases", active_conversations.renew(ctx))
            await _step("end orphaned conversations", instances.end_orphans(ctx))
            await _step(
                "end test runs whose instance is gone", scenario_runs.end_orphaned_runs(ctx)
            )
            await _step("end calls never streamed", telephony.end_expired_calls(ctx))
            await _step(
                "end placed calls never connected", outbound_calls.end_unconnected_calls(ctx)
            )
            await _step("end transfers never finished", transfers.end_stale(ctx))
            await _step("delete what retention policies say is due", retention.sweep(ctx))
            await _step("store the recordings waiting for their store", recordings.retry_due(ctx))
            await _step("do the work after calls that is due", post_call.run_due(ctx))
            await _step("audit the uses of replaced API keys", api_keys.flush_grace_uses(ctx))
            await _step("delete spent credentials", _sweep_spent_credentials(ctx))
        await _step("publish waiting revocations", revocations.publish_pending(ctx))
        await _step("sweep spent jti records", sweep_spent_claims(ctx))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), tick)


async def _sweep_spent_credentials(ctx: Context) -> int:
    """Delete conversation tokens long expired and replaced secrets whose grace ended."""
    swept = await conversation_tokens.sweep_expired(ctx)
    return swept + await api_keys.sweep_replaced_secrets(ctx)


async def _renew_leases(ctx: Context, stopping: asyncio.Event) -> None:
    """The active conversations' leases on the caps, renewed on a beat of their own, five
    times a lease: never behind the timer's database steps, which a slow database holds
    up (services/active_conversations.py rule 3)."""
    beat = ctx.instance.lease_seconds / TICKS_PER_LEASE
    while not stopping.is_set():
        await _step("renew the active conversations' leases", active_conversations.renew(ctx))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), beat)


async def sweep_spent_claims(ctx: Context) -> int:
    """Delete spent `jti` records of embedded mode, a bounded batch at a time, at most
    `SWEEPS_PER_TICK` batches; return how many. Redis expires its own."""
    guard = ctx.jwt.replay_guard
    if not isinstance(guard, DatabaseReplayGuard):
        return 0
    swept = 0
    for _ in range(SWEEPS_PER_TICK):
        batch = await guard.sweep()
        swept += batch
        if batch < SWEEP_BATCH:
            break
    return swept


async def _step(what: str, step: Awaitable[object]) -> None:
    try:
        await step
    except ParleyError as error:
        log.warning("housekeeping could not %s: %s", what, error.code)
    except Exception:
        # The timer must outlive any bug in one step: log it and try again next tick.
        log.exception("housekeeping failed to %s", what)
