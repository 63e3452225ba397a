"""The work after a call, carried out once and never lost (API.md section 16).

When a conversation ends, its ending stamps `post_call_due_at` in the same transaction
(`endings.POST_CALL_HANDOFF` ahead). The instance whose socket ran it renders and keeps the
recording, then claims the work at once (`later`); the timer of any instance claims what is
due and not done (`run_due`: a conversation ended without a socket here, or an instance that died).

The work, for a claim:
1. Wait for the recording: while its upload is still waiting (recordings.py) the work is
   put off `RECORDING_RETRY`, for at most `RECORDING_WAIT` after the end; past that it goes
   on without it (`audio_url` null in the event; the recording still arrives later).
2. The summary, the agent's extractions and evaluations (after_call.py: each piece on its
   own, never raising).
3. In one transaction: the work marked done and `conversation.analysis` written to the
   outbox, `{"conversation" (with `summary` and `audio_url`), "extractions", "evaluations"}`.
   Two claimers that both got that far (a claim outlived by a slow model) send it once:
   only the one that marks it done emits.

A transcript under a `0`-hour policy is deleted only once this is done (the sweep waits
for `post_call_due_at` to be null), so the work reads it first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import recording_uploads as upload_repo
from parley.services import events, recordings
from parley.services.after_call import analyse_after_call
from parley.services.context import Context
from parley.services.conversations import get_conversation

log = logging.getLogger(__name__)

CLAIM: Final = timedelta(minutes=5)
"""How long a claim holds the work (a model answering slowly included)."""
RECORDING_WAIT: Final = timedelta(minutes=2)
RECORDING_RETRY: Final = timedelta(seconds=5)
RUNS_PER_TICK: Final = 10
DRAIN_SECONDS: Final = 10.0
"""How long a stopping server waits for the work it started (the timer finishes the rest)."""


def later(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    render: Callable[[], Awaitable[bytes]] | None,
    policy_id: str | None,
) -> None:
    """In the background: keep the recording (`render`, when there is one), then do the
    work; the socket that ran the conversation closes without waiting."""

    async def work() -> None:
        if render is not None:
            await recordings.keep(
                ctx,
                org_id=org_id,
                conversation_id=conversation_id,
                render=render,
                policy_id=policy_id,
            )
        await run(ctx, org_id=org_id, conversation_id=conversation_id)

    _track(ctx, work(), name=f"after-call-{conversation_id}")


def keep_recording_later(
    ctx: Context,
    *,
    org_id: str,
    conversation_id: str,
    render: Callable[[], Awaitable[bytes]],
    policy_id: str | None,
) -> None:
    """Keep a recording in the background, with no work after it (a call handed over to
    another agent goes on: its work comes when it ends)."""
    _track(
        ctx,
        recordings.keep(
            ctx,
            org_id=org_id,
            conversation_id=conversation_id,
            render=render,
            policy_id=policy_id,
        ),
        name=f"keep-recording-{conversation_id}",
    )


async def run(ctx: Context, *, org_id: str, conversation_id: str) -> bool:
    """Claim this conversation's work and do it; False when it is done or claimed."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        claimed = await conversation_repo.claim_post_call(
            session, now=now, until=now + CLAIM, conversation=(org_id, conversation_id)
        )
    return claimed is not None and await _work(ctx, claimed)


async def run_due(ctx: Context, *, limit: int = RUNS_PER_TICK) -> int:
    """The timer's step: claim and do the work that is due; return how many were done."""
    done = 0
    for _ in range(limit):
        now = utcnow(ctx.clock)
        async with ctx.db.transaction() as session:
            claimed = await conversation_repo.claim_post_call(session, now=now, until=now + CLAIM)
        if claimed is None:
            break
        done += await _work(ctx, claimed)
    return done


async def _work(ctx: Context, claimed: conversation_repo.PostCall) -> bool:
    org_id, conversation_id = claimed.org_id, claimed.id
    now = utcnow(ctx.clock)
    async with ctx.db.statement() as connection:
        uploading = await upload_repo.waiting(connection, org_id, conversation_id)
    if uploading and now - claimed.ended_at < RECORDING_WAIT:  # step 1
        async with ctx.db.transaction() as session:
            await conversation_repo.post_call_at(
                session, org_id, conversation_id, at=now + RECORDING_RETRY
            )
        return False
    made = await analyse_after_call(ctx, org_id, conversation_id)  # step 2
    conversation = await get_conversation(ctx, org_id=org_id, conversation_id=conversation_id)
    data = made.event_data(conversation)

    async def payload() -> dict[str, Any]:
        return data

    async with ctx.db.transaction() as session:  # step 3
        if not await conversation_repo.post_call_done(session, org_id, conversation_id):
            return False
        await events.emit(
            session, ctx, org_id=org_id, event_type="conversation.analysis", data=payload
        )
    return True


def _track(ctx: Context, work: Coroutine[Any, Any, object], *, name: str) -> None:
    task = asyncio.create_task(work, name=name)
    ctx.background.add(task)
    task.add_done_callback(ctx.background.discard)
    task.add_done_callback(_finished)


def _finished(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("the work after a call failed (the timer tries again)", exc_info=error)


async def drain(background: set[asyncio.Task[Any]]) -> None:
    """Wait (`DRAIN_SECONDS` at most) for the work under way (a context's `background`,
    as it closes): a stopping server keeps the recordings of the conversations its shutdown
    ended. What is left then is cancelled before the database closes (its upload, or its
    work, waits in the database for the timers of the instances still running)."""
    if not background:
        return
    _, late = await asyncio.wait(set(background), timeout=DRAIN_SECONDS)
    for task in late:
        task.cancel()
    if late:
        await asyncio.wait(late, timeout=DRAIN_SECONDS)
