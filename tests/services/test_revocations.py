"""A revocation is committed with the change and reaches the shared store when it can
(issue #9 finding 11). The store outage here is a stand-in; tests/faults/test_redis_outage.py
stops a real Redis."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from parley.clock import SystemClock
from parley.composition.context import open_context
from parley.composition.options import RuntimeOptions
from parley.errors import Unavailable
from parley.records import Actor
from parley.services import Context, conversations, endings, revocations, session_tokens
from parley.stores.memory import MemoryRevocations
from tests.databases import TEST_SECRET_KEY
from tests.factories import make_agent, make_org
from tests.types import Tenant

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test")


class SwitchableRevocations:
    """The in-process store, unreachable while `down`."""

    def __init__(self, inner: MemoryRevocations) -> None:
        self.inner = inner
        self.down = True

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        if self.down:
            raise Unavailable()
        await self.inner.revoke(credential_id, expires_at=expires_at)

    async def is_revoked(self, credential_id: str) -> bool:
        if self.down:
            raise Unavailable()
        return await self.inner.is_revoked(credential_id)


@pytest.fixture
async def quiet_ctx(database_url: str) -> AsyncIterator[Context]:
    """A services context with no housekeeping timer: in the app's, the timer publishes
    waiting revocations every second through the app's own store, so it could take the
    entry a test's outage left waiting before the test publishes it."""
    options = RuntimeOptions(
        database_url=database_url,
        redis_url=None,
        default_audience="127.0.0.1",
        secret_key=TEST_SECRET_KEY,
    )
    async with open_context(options, clock=SystemClock()) as ctx:
        yield ctx


def with_store(ctx: Context) -> tuple[Context, SwitchableRevocations]:
    store = SwitchableRevocations(MemoryRevocations(ctx.clock))
    return dataclasses.replace(ctx, revocations=store), store


async def test_revocation_during_store_outage_committed_then_published_when_store_returns(
    quiet_ctx: Context,
) -> None:
    org_id = (await make_org(quiet_ctx)).org.id
    outage, store = with_store(quiet_ctx)
    issued = await session_tokens.create_session_token(outage, org_id=org_id, actor=ACTOR)
    await session_tokens.revoke_session_token(
        outage, org_id=org_id, token_id=issued.token.id, actor=ACTOR
    )  # no Unavailable: the revocation is made
    assert await session_tokens.find_active(outage, issued.secret) is None
    store.down = False
    assert await revocations.publish_pending(outage) >= 1
    assert await store.is_revoked(issued.token.id)
    assert await revocations.publish_pending(outage) == 0


async def test_revocation_conversation_end_during_store_outage_committed_and_published_later(
    quiet_ctx: Context,
) -> None:
    org_id = (await make_org(quiet_ctx)).org.id
    agent = await make_agent(quiet_ctx, org_id)
    outage, store = with_store(quiet_ctx)
    created = await conversations.create_conversation(
        outage, org_id=org_id, agent=agent.name, project=None, conversation_id=None
    )
    await conversations.end_conversation(
        outage, org_id=org_id, conversation_id=created.id, actor=ACTOR
    )
    found = await conversations.get_conversation(outage, org_id=org_id, conversation_id=created.id)
    assert found.status == "ended"
    store.down = False
    assert await revocations.publish_pending(outage) >= 1
    assert await store.is_revoked(endings.ended_marker(org_id, created.id))


async def test_revocation_published_at_once_when_store_is_up(ctx: Context, tenant: Tenant) -> None:
    issued = await session_tokens.create_session_token(ctx, org_id=tenant.org.id, actor=ACTOR)
    await session_tokens.revoke_session_token(
        ctx, org_id=tenant.org.id, token_id=issued.token.id, actor=ACTOR
    )
    assert await ctx.revocations.is_revoked(issued.token.id)
