"""What a conversation keeps, and for how long (API.md section 16): its transcript and its
recording deleted on request (`DELETE /v1/conversations/{id}`) or when its agent's retention
policy says (`sweep`).

The record stays, with `deletion_info` saying when each part went; the audit trail records
each deletion. The recording's file is removed before the row says so: a failure leaves
both (the deletion is tried again), never a row that names a file still kept.

When a conversation ends, `due` turns the policy it went live with into the two times its
parts are due (services/endings.py stores them in the ending's transaction). The sweep runs
on every instance's timer, but only the instance that holds the `retention-sweep` job's
lease (a row in the database) works; and each deletion is guarded (`WHERE … IS NULL`), so
even two sweeps would delete, and audit, each part once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import jobs as job_repo
from parley.errors import ConversationLive, ConversationNotFound
from parley.records import SYSTEM, Actor, RetentionPolicy, Status
from parley.services import audit, recordings
from parley.services.context import Context

log = logging.getLogger(__name__)

SWEEP_JOB: Final = "retention-sweep"
JOB_LEASE: Final = timedelta(seconds=60)
"""How long the sweeping instance holds the job: another takes it over once that passed."""
SWEEP_BATCH: Final = 200
"""Conversations read, and deleted in one transaction, at a time."""
REST_PER_WORK: Final = 2.0
"""Between two batches the sweep waits this many times as long as the last one took."""


def due(
    retention: Mapping[str, Any] | None, ended_at: datetime
) -> tuple[datetime | None, datetime | None]:
    """When a conversation ending at `ended_at` under its `retention` policy (as stored)
    has its transcript and its recording due for deletion; None: kept."""
    policy = RetentionPolicy.from_json(retention)

    def after(hours: int | None) -> datetime | None:
        return None if hours is None else ended_at + timedelta(hours=hours)

    return after(policy.transcripts_hours), after(policy.audio_hours)


async def sweep(ctx: Context) -> int:
    """Delete what is due, if this instance holds the sweep; return how many parts."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        held = await job_repo.claim(
            session, SWEEP_JOB, holder=ctx.instance.id, now=now, lease=JOB_LEASE
        )
    if not held:
        return 0
    deleted = 0
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        async with ctx.db.statement() as connection:
            found = await conversation_repo.due_for_deletion(connection, now=now, limit=SWEEP_BATCH)
        deleted += await _delete_due(ctx, found, now)
        if len(found) < SWEEP_BATCH:
            return deleted
        # The requests come first: rest twice as long as the batch took, so a backlog of
        # thousands takes at most a third of the process (docs/performance.md).
        await asyncio.sleep(REST_PER_WORK * (loop.time() - started))


async def _delete_due(ctx: Context, found: list[conversation_repo.Due], now: datetime) -> int:
    """One batch: the files first, then the rows and the audit events in one transaction
    (each organization's chain locked once)."""
    await recordings.delete_objects(
        ctx,
        [
            (item.org_id, item.recording_policy_id, item.recording_key)
            for item in found
            if item.audio and item.recording_key
        ],
    )
    async with ctx.db.transaction() as session:
        deleted = await conversation_repo.delete_due(session, found, at=now)
        by_org: dict[str, list[tuple[str, str, Mapping[str, Any] | None]]] = defaultdict(list)
        for org_id, conversation_id, parts in deleted:
            details = {"parts": list(parts), "by": "data_retention_policy"}
            by_org[org_id].append(("conversation.delete", conversation_id, details))
        for org_id, entries in by_org.items():
            await audit.record_many(session, ctx, org_id=org_id, actor=SYSTEM, entries=entries)
    return sum(len(parts) for _, _, parts in deleted)


async def delete_conversation(
    ctx: Context, *, org_id: str, conversation_id: str, actor: Actor
) -> None:
    """Delete an ended conversation's transcript and recording now; 409 `conversation_live`
    while it is pending or live, 404 when there is none."""
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None:
            raise ConversationNotFound()
        if found.status != Status.ENDED:
            raise ConversationLive()
        if found.recording_key is not None:
            await recordings.delete_objects(
                ctx, [(org_id, found.recording_policy_id, found.recording_key)]
            )
        due = conversation_repo.Due(
            org_id=org_id,
            id=conversation_id,
            transcript=found.transcripts_deleted_at is None,
            audio=found.audio_deleted_at is None,
            recording_key=found.recording_key,
            recording_policy_id=found.recording_policy_id,
        )
        await conversation_repo.delete_due(session, [due], at=utcnow(ctx.clock))
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="conversation.delete",
            target=conversation_id,
        )
