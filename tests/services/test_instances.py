"""Leases on live conversations: an instance's conversations end when its lease runs out
(issue #9 finding 2), on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from parley.clock import utcnow
from parley.config import Settings
from parley.db.repos import instances as instance_repo
from parley.db.tables import InstanceRow
from parley.services import Context, conversations, instances
from parley.services.context import Instance
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    """The app's own timer keeps out of the way: its lease is an hour, the tests' 15 s."""
    built: Settings = settings_factory(conversation_lease_seconds=3600)
    return built


def as_instance(ctx: Context, name: str, lease: float = 15.0) -> Context:
    return dataclasses.replace(ctx, instance=Instance(id=name, lease_seconds=lease))


async def go_live(ctx: Context, tenant: Tenant, agent: str) -> str:
    conversation, _ = await conversations.start_live(
        ctx, org_id=tenant.org.id, conversation_id=None, create_if_missing=False,
        agent=agent, project=None, end_user=None,
    )  # fmt: skip
    await conversations.add_item(
        ctx, org_id=tenant.org.id, conversation_id=conversation.id, role="user", text="kept"
    )
    return conversation.id


async def status(ctx: Context, tenant: Tenant, conversation_id: str) -> str:
    found = await conversations.get_conversation(
        ctx, org_id=tenant.org.id, conversation_id=conversation_id
    )
    return found.status


async def age_heartbeat(ctx: Context, name: str, seconds: float) -> None:
    async with ctx.db.transaction() as session:
        await session.execute(
            update(InstanceRow)
            .where(InstanceRow.id == name)
            .values(heartbeat_at=utcnow(ctx.clock) - timedelta(seconds=seconds))
        )


async def test_lease_orphan_of_silent_instance_ended_items_kept(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    gone, alive = as_instance(ctx, "gone"), as_instance(ctx, "alive")
    await instances.start(gone)
    await instances.start(alive)
    orphan = await go_live(gone, tenant, agent)
    served = await go_live(alive, tenant, agent)
    await age_heartbeat(ctx, "gone", 16)  # silent for longer than the lease
    assert await instances.end_orphans(alive) >= 1
    assert await status(ctx, tenant, orphan) == "ended"
    assert await status(ctx, tenant, served) == "live"
    ended = await conversations.get_conversation(ctx, org_id=tenant.org.id, conversation_id=orphan)
    assert ended.ended_at is not None
    assert [item.text for item in ended.items] == ["kept"]


async def test_lease_fresh_heartbeat_keeps_conversation_live(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    other, me = as_instance(ctx, "other"), as_instance(ctx, "me")
    await instances.start(other)
    await instances.start(me)
    served = await go_live(other, tenant, agent)
    await age_heartbeat(ctx, "other", 10)  # within the 15 s lease
    await instances.end_orphans(me)
    assert await status(ctx, tenant, served) == "live"


async def test_lease_restarted_instance_ends_previous_lifes_conversations_at_once(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    first_life = as_instance(ctx, "host:8000")
    await instances.start(first_life)
    conversation_id = await go_live(first_life, tenant, agent)
    # killed; the heartbeat is still fresh, but the same name starts again
    assert await instances.start(as_instance(ctx, "host:8000")) >= 1
    assert await status(ctx, tenant, conversation_id) == "ended"


async def test_lease_own_conversations_spared_even_when_own_heartbeat_is_late(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    me = as_instance(ctx, "me-late")
    await instances.start(me)
    conversation_id = await go_live(me, tenant, agent)
    await age_heartbeat(ctx, "me-late", 60)
    await instances.end_orphans(me)
    assert await status(ctx, tenant, conversation_id) == "live"


async def test_lease_renew_registers_again_when_row_was_forgotten(ctx: Context) -> None:
    me = as_instance(ctx, "forgotten")
    await instances.start(me)
    async with ctx.db.transaction() as session:
        await instance_repo.retire(session, "forgotten")
    await instances.renew(me)
    async with ctx.db.transaction() as session:
        assert await session.get(InstanceRow, "forgotten") is not None


async def test_lease_clean_stop_ends_own_conversations_only(
    ctx: Context, tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = (await make_agent(tenant))["name"]
    leaving, staying = as_instance(ctx, "leaving"), as_instance(ctx, "staying")
    await instances.start(leaving)
    await instances.start(staying)
    mine = await go_live(leaving, tenant, agent)
    theirs = await go_live(staying, tenant, agent)
    await instances.stop(leaving)
    assert await status(ctx, tenant, mine) == "ended"
    assert await status(ctx, tenant, theirs) == "live"
