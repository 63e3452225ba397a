"""Running a replay (`conversations.replay`, API.md section 17) in the background: the
recorded user channel fed, at real-time pace, to the same `LiveSession` and engine a
socket conversation uses, through an in-process wire (wires/replay_codec.py).

The feed sends the audio in `CHUNK_S` pieces, each when its time has come (paced against
the loop's clock, so the pace does not drift); after the recording it sends silence until
the agent has answered the last turn and been quiet for `QUIET_S` (at most `TAIL_S`), then
hangs up: the conversation ends as when a client leaves (`ended_by` `user`). The task is
tracked in the context's `background`, which a stopping server drains (a replay still
running is then cancelled, and its session ends the conversation). A session that never made the
conversation live leaves it ended, not `pending` (services/conversation_replays.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from parley.engine import EngineFactory
from parley.records import Principal
from parley.services import Context, live
from parley.services.conversation_replays import ReplayPlan, abandon_replay
from parley.wires.replay_codec import ReplayCodec

log = logging.getLogger(__name__)

CHUNK_S: Final = 0.02
QUIET_S: Final = 1.0
TAIL_S: Final = 20.0


def start_replay(
    ctx: Context, factory: EngineFactory, principal: Principal, plan: ReplayPlan
) -> asyncio.Task[None]:
    """Run the replay in the background (tracked in `ctx.background`)."""
    task = asyncio.create_task(run_replay(ctx, factory, principal, plan), name="replay")
    ctx.background.add(task)
    task.add_done_callback(ctx.background.discard)
    task.add_done_callback(_finished)
    return task


async def run_replay(
    ctx: Context, factory: EngineFactory, principal: Principal, plan: ReplayPlan
) -> None:
    """Feed the plan's audio to a session until the replay is over (see the module doc)."""
    loop = asyncio.get_running_loop()
    wire = ReplayCodec(loop.time)
    handshake = live.Handshake(
        principal=principal,
        conversation_id=plan.conversation_id,
        create_if_missing=False,
        expires_at=None,
        revocable_id=None,
    )
    session = live.LiveSession(ctx, factory, handshake, wire, send=_nowhere, close=_closed)
    feed = _Feed(plan, wire, loop.time)
    try:
        await session.run(feed.receive, opening=[plan.configure])
    finally:
        if not wire.live:
            await asyncio.shield(abandon_replay(ctx, plan))


class _Feed:
    """The session's `receive`: the recording in real time, then silence, then None."""

    def __init__(self, plan: ReplayPlan, wire: ReplayCodec, now: Callable[[], float]) -> None:
        self._size = round(plan.sample_rate * CHUNK_S) * 2  # 16-bit samples
        self._audio = plan.user_audio
        self._count = -(-len(self._audio) // self._size)  # chunks, the last one maybe short
        self._silence = bytes(self._size)
        self._wire = wire
        self._now = now
        self._start: float | None = None
        self._sent = 0

    async def receive(self) -> bytes | None:
        now = self._now()
        if self._start is None:
            self._start = now
        if self._wire.failed:
            return None
        if self._sent >= self._count:
            tail = now - (self._start + self._count * CHUNK_S)
            if tail >= TAIL_S or (tail > 0 and self._wire.settled(QUIET_S)):
                return None
        due = self._start + self._sent * CHUNK_S
        if due > now:
            await asyncio.sleep(due - now)
        at = self._sent * self._size
        self._sent += 1
        return self._audio[at : at + self._size] if at < len(self._audio) else self._silence


async def _nowhere(_frame: str | bytes) -> None:
    """A replay has no client: what the session says goes nowhere (its codec sends none)."""


async def _closed(_code: int, _reason: str) -> None:
    """Nothing to close: the feed has stopped."""


def _finished(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("a replay failed", exc_info=error)
