"""The work after a call (services/post_call.py): due when the conversation ends, done once
by the instance that ended it or else by a timer, after the recording is stored (or a
bounded wait), and announced once as `conversation.analysis`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from parley.recordings.directory import DirectoryStore
from parley.records import RetentionPolicy
from parley.services import Context, conversations, endings, post_call, recordings, retention
from parley.services.webhook_delivery import claim
from tests.factories import make_agent, make_org
from tests.services.test_live_session import MovableClock
from tests.services.test_retention import agent_keeping
from tests.services.webhook_helpers import local_context, make_webhook

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:9/never-called"
"""No worker runs here: the deliveries are read from the outbox."""


@pytest.fixture
async def moved(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Context, MovableClock]]:
    clock = MovableClock()
    async with local_context(database_url, instance_id="post-call-test") as raw:
        yield (
            dataclasses.replace(
                raw, clock=clock, recordings=DirectoryStore(tmp_path / "recordings")
            ),
            clock,
        )


async def analyses(ctx: Context) -> list[dict[str, Any]]:
    """The `conversation.analysis` bodies in the outbox, oldest first."""
    bodies = [json.loads(due.body) for due in await claim(ctx, limit=100, per_webhook=100)]
    return [body for body in bodies if body["event_type"] == "conversation.analysis"]


async def ended(ctx: Context, org_id: str, agent: str, said: str = "Hello") -> str:
    live, _ = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=True,
        agent=agent,
        project=None,
        end_user=None,
    )
    await conversations.add_item(
        ctx, org_id=org_id, conversation_id=live.id, role="user", text=said
    )
    await endings.end_conversation(
        ctx, org_id=org_id, conversation_id=live.id, ending=endings.CLIENT_CLOSED
    )
    return live.id


async def test_post_call_analysis_sent_once_by_the_ending_instance_with_the_recording(
    moved: tuple[Context, MovableClock],
) -> None:
    ctx, _clock = moved
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await make_webhook(ctx, org_id, URL, ["conversation.analysis"])
    conversation_id = await ended(ctx, org_id, agent.id)

    async def wav() -> bytes:
        return b"RIFF-after-call"

    assert await recordings.keep(ctx, org_id=org_id, conversation_id=conversation_id, render=wav)
    assert await post_call.run(ctx, org_id=org_id, conversation_id=conversation_id)
    assert not await post_call.run(ctx, org_id=org_id, conversation_id=conversation_id)
    assert await post_call.run_due(ctx) == 0
    [body] = await analyses(ctx)
    data = body["data"]
    assert set(data) == {"conversation", "extractions", "evaluations"}
    assert data["conversation"]["id"] == conversation_id
    assert data["conversation"]["audio_url"] is not None  # stored before the event
    assert data["conversation"]["summary"] is None  # no language model here
    assert data["extractions"] == data["evaluations"] == []


async def test_post_call_timer_takes_over_after_the_handoff_once_across_instances(
    moved: tuple[Context, MovableClock], database_url: str
) -> None:
    """Nobody ran the work where the conversation ended (ended by a sweep, or its instance
    died): the timers find it once the hand-off time has passed, and only one sends it."""
    ctx, clock = moved
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await make_webhook(ctx, org_id, URL, ["conversation.analysis"])
    made = [await ended(ctx, org_id, agent.id) for _ in range(3)]
    assert await post_call.run_due(ctx) == 0  # the ending instance's turn
    clock.ahead = endings.POST_CALL_HANDOFF.total_seconds() + 1
    async with local_context(database_url, instance_id="other-instance") as raw:
        other = dataclasses.replace(raw, clock=clock, recordings=ctx.recordings)
        counts = await asyncio.gather(post_call.run_due(ctx), post_call.run_due(other))
    assert sum(counts) == 3
    assert sorted(body["data"]["conversation"]["id"] for body in await analyses(ctx)) == sorted(
        made
    )


async def test_post_call_waits_for_a_recording_still_uploading_then_goes_on_without(
    moved: tuple[Context, MovableClock],
) -> None:
    ctx, clock = moved
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await make_webhook(ctx, org_id, URL, ["conversation.analysis"])
    conversation_id = await ended(ctx, org_id, agent.id)
    down = dataclasses.replace(ctx, recordings=DirectoryStore(Path("/proc/nowhere")))

    async def wav() -> bytes:
        return b"RIFF"

    assert not await recordings.keep(
        down, org_id=org_id, conversation_id=conversation_id, render=wav
    )
    assert not await post_call.run(ctx, org_id=org_id, conversation_id=conversation_id)
    assert await analyses(ctx) == []  # put off: the recording may still come
    clock.ahead = post_call.RECORDING_WAIT.total_seconds() + 1
    assert await post_call.run_due(down) == 1  # waited long enough: on without it
    [body] = await analyses(ctx)
    assert body["data"]["conversation"]["audio_url"] is None


async def test_retention_zero_hours_transcript_kept_until_the_post_call_work_is_done(
    moved: tuple[Context, MovableClock],
) -> None:
    ctx, _clock = moved
    org_id, agent = await agent_keeping(ctx, RetentionPolicy(transcripts_hours=0))
    conversation_id = await ended(ctx, org_id, agent)
    assert await retention.sweep(ctx) == 0  # the work after the call reads it first
    assert await post_call.run(ctx, org_id=org_id, conversation_id=conversation_id)
    assert await retention.sweep(ctx) == 1
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert found.items == ()
