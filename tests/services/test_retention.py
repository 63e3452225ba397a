"""Data retention (API.md section 16): when a transcript and a recording are due, the sweep
that deletes them (once, whoever sweeps), `deletion_info` and the audit trail; a clock the
tests move, never sleeps."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from parley.clock import utcnow
from parley.db.repos import jobs as job_repo
from parley.recordings.directory import DirectoryStore
from parley.records import OPERATOR, AgentPatch, RetentionPolicy
from parley.services import (
    Context,
    agents,
    audit,
    conversations,
    endings,
    post_call,
    recordings,
    retention,
)
from tests.factories import make_agent, make_org, unique_name
from tests.services.test_live_session import MovableClock
from tests.services.webhook_helpers import local_context

pytestmark = pytest.mark.anyio

HOUR = 3600.0


async def agent_keeping(ctx: Context, policy: RetentionPolicy) -> tuple[str, str]:
    """A new organization and its agent with `policy`: (organization, agent name)."""
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await agents.update_agent(
        ctx,
        org_id=org_id,
        ref=agent.id,
        project=None,
        patch=AgentPatch(data_retention_policy=policy),
        actor=OPERATOR,
    )
    return org_id, agent.name


async def spoken_and_ended(
    ctx: Context, org_id: str, agent: str, *, items: int, recorded: bool, after_call: bool = True
) -> str:
    """A conversation of `agent`: live, `items` said, recorded if asked, and ended."""
    conversation, _ = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=True,
        agent=agent,
        project=None,
        end_user=None,
    )
    for n in range(items):
        await conversations.add_item(
            ctx, org_id=org_id, conversation_id=conversation.id, role="user", text=f"said {n}"
        )

    async def wav() -> bytes:
        return b"RIFF-recording"

    if recorded:
        assert await recordings.keep(
            ctx, org_id=org_id, conversation_id=conversation.id, render=wav
        )
    await endings.end_conversation(
        ctx, org_id=org_id, conversation_id=conversation.id, ending=endings.CLIENT_CLOSED
    )
    if after_call:  # as the ending instance does: a `0`-hour transcript waits for it
        assert await post_call.run(ctx, org_id=org_id, conversation_id=conversation.id)
    return conversation.id


async def ended_conversation(
    ctx: Context, policy: RetentionPolicy, *, items: int = 2
) -> tuple[str, str]:
    """A conversation of an agent with `policy`: live, spoken, recorded and ended."""
    org_id, agent = await agent_keeping(ctx, policy)
    return org_id, await spoken_and_ended(ctx, org_id, agent, items=items, recorded=True)


@pytest.fixture
def moved(ctx: Context, tmp_path: Path, timer_stopped: None) -> tuple[Context, MovableClock]:
    """The app's context with a clock the test moves and a recordings directory; the app's
    own timer, which sweeps too, stopped."""
    clock = MovableClock()
    store = DirectoryStore(tmp_path / "recordings")
    return dataclasses.replace(ctx, clock=clock, recordings=store), clock


async def deletions(ctx: Context, org_id: str) -> list[tuple[str, str, list[str]]]:
    page = await audit.list_events(
        ctx, org_id=org_id, action="conversation.delete", target=None, cursor=None, limit=100
    )
    return [(event.actor_kind, event.target, list(event.details["parts"])) for event in page.items]


async def test_retention_delete_after_hours_sweep_deletes_each_part_when_due(
    moved: tuple[Context, MovableClock],
) -> None:
    ctx, clock = moved
    policy = RetentionPolicy(transcripts_hours=24, audio_hours=0)
    org_id, conversation_id = await ended_conversation(ctx, policy)
    store = ctx.recordings
    assert isinstance(store, DirectoryStore)
    key = recordings.recording_key(org_id, conversation_id)
    assert await store.find(key) is not None

    assert await retention.sweep(ctx) == 1  # `0`: the recording, as soon as it is kept
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert await store.find(key) is None
    assert found.audio_url is None
    assert found.audio_deleted_at is not None
    assert [item.text for item in found.items] == ["said 0", "said 1"]  # not due yet

    clock.ahead = 23 * HOUR
    assert await retention.sweep(ctx) == 0
    clock.ahead = 24 * HOUR + 1
    assert await retention.sweep(ctx) == 1
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.items == ()
    assert found.transcripts_deleted_at is not None
    assert found.status == "ended"  # the record stays
    assert await retention.sweep(ctx) == 0  # nothing twice
    assert await deletions(ctx, org_id) == [
        ("system", conversation_id, ["transcript"]),
        ("system", conversation_id, ["audio"]),
    ]


async def test_retention_null_hours_keep_everything(moved: tuple[Context, MovableClock]) -> None:
    ctx, clock = moved
    org_id, conversation_id = await ended_conversation(ctx, RetentionPolicy())
    clock.ahead = 10 * 365 * 24 * HOUR
    assert await retention.sweep(ctx) == 0
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert len(found.items) == 2
    assert found.audio_url is not None


async def test_retention_sweep_two_instances_each_deletion_done_once(
    moved: tuple[Context, MovableClock], database_url: str
) -> None:
    """Two instances on one database sweep at once: each part is deleted, and audited, once;
    only the instance holding the job sweeps, the other takes over when its lease ends."""
    ctx, clock = moved
    made = [await ended_conversation(ctx, RetentionPolicy(0, 0, 0), items=1) for _ in range(6)]
    async with local_context(database_url, instance_id="other-instance") as raw:
        other = dataclasses.replace(raw, clock=clock, recordings=ctx.recordings)
        counts = await asyncio.gather(retention.sweep(ctx), retention.sweep(other))
        assert sorted(counts) == [0, 12]  # one of them held the job
        holder, waiter = (ctx, other) if counts[0] else (other, ctx)
        made.append(await ended_conversation(ctx, RetentionPolicy(0, 0, 0), items=1))
        assert await retention.sweep(waiter) == 0  # the holder's lease runs
        clock.ahead = retention.JOB_LEASE.total_seconds() + 1  # the holder stopped sweeping
        assert await retention.sweep(waiter) == 2  # the other takes the job over
        assert await retention.sweep(holder) == 0  # and holds it now
    for org_id, conversation_id in made:
        assert await deletions(ctx, org_id) == [
            ("system", conversation_id, ["transcript", "audio"])
        ]
        [report] = await audit.verify_chains(ctx, org_id=org_id)
        assert report.ok  # the sweep's events extend the hash chain like any other


async def test_retention_job_row_created_by_two_instances_at_once_one_claims_no_conflict(
    ctx: Context, database_url: str
) -> None:
    """The first claims of a job, on two instances at once, both find no row and insert it:
    one holds the job, the other is told it is held (it was a Conflict, a CI run's
    failure of the test above on PostgreSQL)."""
    name, now = unique_name("job"), utcnow(ctx.clock)
    first_selected = asyncio.Event()

    async def first() -> bool:
        async with ctx.db.transaction() as session:
            held = await job_repo.claim(
                session, name, holder="a", now=now, lease=retention.JOB_LEASE
            )
            first_selected.set()
            await asyncio.sleep(0.3)  # the other looks for the row before this commits
            return held

    async def second(other: Context) -> bool:
        await first_selected.wait()
        async with other.db.transaction() as session:
            return await job_repo.claim(
                session, name, holder="b", now=now, lease=retention.JOB_LEASE
            )

    async with local_context(database_url, instance_id="other-instance") as other:
        assert await asyncio.gather(first(), second(other)) == [True, False]


async def test_retention_sweep_batch_of_one_organization_keeps_its_chain_whole(
    moved: tuple[Context, MovableClock],
) -> None:
    """A batch's events of one organization are appended together (the chain locked once):
    each is a link of the chain, in order."""
    ctx, _clock = moved
    org_id, agent = await agent_keeping(ctx, RetentionPolicy(transcripts_hours=0, audio_hours=0))
    ids = [await spoken_and_ended(ctx, org_id, agent, items=1, recorded=False) for _ in range(5)]
    assert await retention.sweep(ctx) == 10  # five transcripts, five "audio" (none kept)
    found = await deletions(ctx, org_id)
    assert sorted(target for _, target, _ in found) == sorted(ids)
    [report] = await audit.verify_chains(ctx, org_id=org_id)
    assert report.ok
    assert report.events >= 5 + 2  # the org's creation and the agent's changes come first


def test_retention_policy_round_trips_in_the_sdk_shape() -> None:
    assert RetentionPolicy.from_json(RetentionPolicy(zero_data_retention=True).to_json()) == (
        RetentionPolicy(zero_data_retention=True)
    )
    assert RetentionPolicy.from_json(None) == RetentionPolicy()
    assert RetentionPolicy(transcripts_hours=5).to_json() == {
        "zero_data_retention": False,
        "transcripts": {"delete_after_hours": 5},
        "audio_recordings": {"delete_after_hours": None},
    }
