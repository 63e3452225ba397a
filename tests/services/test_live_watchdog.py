"""The live socket's watchdog rides out a short store outage and closes 1011 on a long one."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from parley.errors import Unavailable
from parley.records import Principal
from parley.services import Context
from parley.services.live import Handshake, watchdog

pytestmark = pytest.mark.anyio


class FlakyRevocations:
    """Unreachable for `down` checks, then answers; `revoked` names what is revoked."""

    def __init__(self, down: int, revoked: frozenset[str] = frozenset()) -> None:
        self.down = down
        self.revoked = revoked
        self.checks = 0
        self.checked_at: list[float] = []

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        raise AssertionError("not used")

    async def is_revoked(self, credential_id: str) -> bool:
        self.checks += 1
        self.checked_at.append(time.monotonic())
        if self.checks <= self.down:
            raise Unavailable()
        return credential_id in self.revoked


def handshake() -> Handshake:
    principal = Principal(kind="session_token", org_id="org_x", credential_id="sess_1")
    return Handshake(principal, "conv-1", False, None, "sess_1")


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watchdog, "WATCH_INTERVAL_SECONDS", 0.02)
    monkeypatch.setattr(watchdog, "STORE_OUTAGE_SECONDS", 0.3)


async def test_watchdog_short_store_outage_ridden_out_then_revocation_closes(ctx: Context) -> None:
    store = FlakyRevocations(down=5, revoked=frozenset({"sess_1"}))  # ~0.1 s of outage
    verdict = await watchdog.watch(
        dataclasses.replace(ctx, revocations=store), handshake(), lambda: "conv-1"
    )
    assert (verdict.close_code, verdict.reason) == (1008, "session token revoked")


async def test_watchdog_store_outage_longer_than_bound_closes_1011(ctx: Context) -> None:
    store = FlakyRevocations(down=10_000)
    verdict = await watchdog.watch(
        dataclasses.replace(ctx, revocations=store), handshake(), lambda: "conv-1"
    )
    assert (verdict.close_code, verdict.reason) == (1011, "revocation store unavailable")
    # It rode the outage out for the bound, trying at each tick, before closing (a loaded
    # machine makes fewer ticks fit: the time is the rule, not the count)...
    assert store.checks >= 2
    ridden = store.checked_at[-1] - store.checked_at[0]
    assert ridden >= watchdog.STORE_OUTAGE_SECONDS - 0.05, ridden
    # ...and closed at the first check past the bound: the one before it was still inside
    # it. (Not a wall-clock bound on the last check: on a loaded machine the event loop
    # may not run the watchdog's next tick for seconds, which is the machine, not the rule.)
    before_last = store.checked_at[-2] - store.checked_at[0]
    assert before_last < watchdog.STORE_OUTAGE_SECONDS + 0.05, before_last


class SwallowingRevocations:
    """Answers after a while, and swallows a cancellation that lands meanwhile (as redis-py
    can), answering or raising Unavailable instead."""

    def __init__(self, *, then_unavailable: bool) -> None:
        self.then_unavailable = then_unavailable

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        raise AssertionError("not used")

    async def is_revoked(self, credential_id: str) -> bool:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            # Swallowed on purpose: this double is redis-py losing a cancellation mid-command,
            # the fault the watchdog must survive.
            if self.then_unavailable:
                raise Unavailable() from None
        return False


@pytest.mark.parametrize("then_unavailable", [False, True], ids=["answers", "unavailable"])
async def test_watchdog_stops_when_the_store_swallows_its_cancellation(
    ctx: Context, then_unavailable: bool
) -> None:
    store = SwallowingRevocations(then_unavailable=then_unavailable)
    task = asyncio.create_task(
        watchdog.watch(dataclasses.replace(ctx, revocations=store), handshake(), lambda: "c")
    )
    for _ in range(200):  # until the task is inside the store's call
        await asyncio.sleep(0.005)
        if store_busy(task):
            break
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert task in done
    assert task.cancelled()


def store_busy(task: asyncio.Task[object]) -> bool:
    return any(frame.f_code.co_name == "is_revoked" for frame in _awaited_frames(task))


def _awaited_frames(task: asyncio.Task[object]) -> list[Any]:
    frames = []
    coroutine: Any = task.get_coro()
    while coroutine is not None and hasattr(coroutine, "cr_frame"):
        if coroutine.cr_frame is not None:
            frames.append(coroutine.cr_frame)
        coroutine = coroutine.cr_await
    return frames
