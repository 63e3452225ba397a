"""SharedProbe: concurrent health checks share one run; no answer is reused later."""

from __future__ import annotations

import asyncio

import pytest

from parley.errors import Unavailable
from parley.shared_probe import SharedProbe

pytestmark = pytest.mark.anyio


async def test_shared_probe_concurrent_callers_share_one_run_later_callers_run_again() -> None:
    runs = 0
    gate = asyncio.Event()

    async def probe() -> None:
        nonlocal runs
        runs += 1
        await gate.wait()

    shared = SharedProbe(probe)
    waiting = [asyncio.ensure_future(shared()) for _ in range(10)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*waiting)
    assert runs == 1
    await shared()
    assert runs == 2  # an earlier success is never trusted


async def test_shared_probe_failure_reaches_every_caller_cancelled_caller_spares_the_run() -> None:
    gate = asyncio.Event()

    async def probe() -> None:
        await gate.wait()
        raise Unavailable("down")

    shared = SharedProbe(probe)
    doomed = asyncio.ensure_future(shared())
    patient = [asyncio.ensure_future(shared()) for _ in range(3)]
    await asyncio.sleep(0)
    doomed.cancel()
    gate.set()
    outcomes = await asyncio.gather(*patient, return_exceptions=True)
    assert all(isinstance(outcome, Unavailable) for outcome in outcomes)
