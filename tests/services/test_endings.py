"""Every end of a conversation, by any path, sets `ended_by` once and sends
`conversation.ended` once (API.md section 15, "Endings"): each path that ends one today,
and two enders racing, on SQLite and PostgreSQL. The sessions run on memory sockets
(tests/services/test_live_session.py's); the events are read from the outbox (no worker
runs)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa

from parley import engine
from parley.db.tables import InstanceRow
from parley.records import OPERATOR, AgentPatch
from parley.services import Context, agents, conversations, endings, instances, telephony
from parley.services.context import Instance
from parley.services.live.call import abandon_call
from parley.services.orgs import NewOrganization
from parley.services.webhook_delivery import claim
from tests.factories import make_agent, make_org, unique_name
from tests.services.test_live_session import (
    MovableClock,
    api_key_handshake,
    phone_call,
    start_sessions,
)
from tests.services.webhook_helpers import local_context, make_webhook

pytestmark = pytest.mark.anyio
URL = "http://127.0.0.1:9/never-called"


@pytest.fixture
async def ctx(database_url: str) -> AsyncIterator[Context]:
    async with local_context(database_url, instance_id=unique_name("endings")) as context:
        yield context


async def ended_events(ctx: Context) -> list[dict[str, Any]]:
    """The `conversation` of each conversation.ended written so far (the database is the
    test's own)."""
    bodies = [json.loads(due.body) for due in await claim(ctx, limit=100, per_webhook=100)]
    return [
        body["data"]["conversation"]
        for body in bodies
        if body["event_type"] == "conversation.ended"
    ]


async def listening_org(ctx: Context) -> NewOrganization:
    org = await make_org(ctx)
    await make_webhook(ctx, org.org.id, URL, ["conversation.ended"])
    return org


async def ended_once(ctx: Context, org_id: str, conversation_id: str) -> str:
    """Assert one conversation.ended for the conversation, as stored; return its ended_by
    (`ctx`'s clock must be the enders': a delivery is due from when it was written)."""
    sent = [shown for shown in await ended_events(ctx) if shown["id"] == conversation_id]
    assert len(sent) == 1, sent
    stored = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    assert stored.status == "ended"
    assert sent[0]["ended_by"] == stored.ended_by
    return str(stored.ended_by)


async def test_client_closing_the_socket_sends_conversation_ended_once(ctx: Context) -> None:
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)
        conversation_id = await live.configure()
        live.socket.push(None)
        assert await live.closed() == (1000, "")
    assert await ended_once(ctx, org.org.id, conversation_id) == "user"


async def test_api_end_of_a_live_socket_sends_conversation_ended_once(ctx: Context) -> None:
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)
        conversation_id = await live.configure()
        for _ in range(2):  # idempotent
            await conversations.end_conversation(
                ctx, org_id=org.org.id, conversation_id=conversation_id, actor=OPERATOR
            )
        assert await live.closed() == (1000, "conversation ended")  # its socket's end adds none
    assert await ended_once(ctx, org.org.id, conversation_id) == "api"


async def test_assistant_ending_sends_conversation_ended_once(ctx: Context) -> None:
    org = await listening_org(ctx)
    async with start_sessions(ctx) as start:
        live = await start(org=org)
        conversation_id = await live.configure()
        live.engine.push(engine.AssistantEndedConversation())
        assert await live.closed() == (1000, "conversation ended")
    assert await ended_once(ctx, org.org.id, conversation_id) == "assistant"


async def test_token_expiry_sends_conversation_ended_once(ctx: Context) -> None:
    clock = MovableClock()
    moved = dataclasses.replace(ctx, clock=clock)
    org = await listening_org(moved)
    handshake = dataclasses.replace(
        await api_key_handshake(moved, org), expires_at=clock.time() + 3600
    )
    async with start_sessions(moved) as start:
        live = await start(org=org, handshake=handshake)
        conversation_id = await live.configure()
        clock.ahead = 3601
        assert await live.closed() == (1008, "token expired")
    assert await ended_once(moved, org.org.id, conversation_id) == "timeout"


async def test_phone_stop_sends_conversation_ended_once(ctx: Context) -> None:
    async with start_sessions(ctx) as start:
        live, conversation_id = await phone_call(ctx, start)
        await make_webhook(ctx, live.org.org.id, URL, ["conversation.ended"])
        live.socket.push({"event": "stop"})
        assert await live.closed() == (1000, "")
    assert await ended_once(ctx, live.org.org.id, conversation_id) == "user"


async def answered_call(ctx: Context) -> tuple[str, str, str, str]:
    """A call answered by the voice webhook: (org, agent, conversation, stream token)."""
    org = await listening_org(ctx)
    agent = await make_agent(ctx, org.org.id)
    number = "+1555" + "".join(secrets.choice("0123456789") for _ in range(7))
    await agents.update_agent(
        ctx,
        org_id=org.org.id,
        ref=agent.id,
        project=None,
        patch=AgentPatch(phone_numbers=(number,)),
        actor=OPERATOR,
    )
    params = [("CallSid", "CA" + secrets.token_hex(16)), ("From", "+15550000000"), ("To", number)]
    answer = await telephony.answer_call(ctx, org_id=org.org.id, params=params)
    assert answer.conversation_id is not None
    assert answer.stream_token is not None
    return org.org.id, agent.id, answer.conversation_id, answer.stream_token


async def test_expired_stream_token_sweep_sends_conversation_ended_once(ctx: Context) -> None:
    clock = MovableClock()
    moved = dataclasses.replace(ctx, clock=clock)
    org_id, _, conversation_id, _ = await answered_call(moved)
    clock.ahead = telephony.STREAM_TOKEN_TTL_SECONDS + 1
    assert await telephony.end_expired_calls(moved) >= 1
    assert await telephony.end_expired_calls(moved) == 0
    assert await ended_once(moved, org_id, conversation_id) == "timeout"


async def test_call_of_a_disabled_agent_abandoned_sends_conversation_ended_once(
    ctx: Context,
) -> None:
    org_id, agent_id, conversation_id, _ = await answered_call(ctx)
    await agents.disable_agent(ctx, org_id=org_id, ref=agent_id, project=None, actor=OPERATOR)
    for _ in range(2):
        await abandon_call(ctx, org_id=org_id, conversation_id=conversation_id)
    assert await ended_once(ctx, org_id, conversation_id) == "error"


async def live_on(ctx: Context, org_id: str) -> str:
    agent = await make_agent(ctx, org_id)
    live, _ = await conversations.start_live(
        ctx,
        org_id=org_id,
        conversation_id=None,
        create_if_missing=False,
        agent=agent.id,
        project=None,
        end_user=None,
    )
    return live.id


async def test_orphans_ended_by_two_instances_at_once_send_conversation_ended_once(
    ctx: Context, database_url: str
) -> None:
    org = await listening_org(ctx)
    async with local_context(database_url, instance_id=unique_name("gone")) as gone:
        await instances.start(gone)
        conversation_id = await live_on(gone, org.org.id)
    await asyncio.sleep(0.2)  # "gone" never renews its lease: stale after 0.1 s
    async with local_context(database_url, instance_id=unique_name("other")) as other:
        impatient = [
            dataclasses.replace(each, instance=Instance(id=each.instance.id, lease_seconds=0.1))
            for each in (ctx, other)
        ]
        counts = await asyncio.gather(*(instances.end_orphans(each) for each in impatient))
    assert sum(counts) >= 1
    assert await ended_once(ctx, org.org.id, conversation_id) == "shutdown"


async def test_stale_instance_sweep_skips_rows_another_sweep_holds(postgres_url: str) -> None:
    """Two sweeps at once never wait on each other's row locks (a wait could deadlock or
    run past the statement timeout on a loaded database): while one transaction holds a
    stale instance's row, another sweep finishes at once and leaves that row to it."""
    async with (
        local_context(postgres_url, instance_id=unique_name("sweeper")) as ctx,
        local_context(postgres_url, instance_id=unique_name("gone")) as gone,
    ):
        await instances.start(gone)
        await asyncio.sleep(0.2)
        impatient = dataclasses.replace(
            ctx, instance=Instance(id=ctx.instance.id, lease_seconds=0.1)
        )
        async with gone.db.transaction() as holder:
            await holder.execute(
                sa.select(InstanceRow.id)
                .where(InstanceRow.id == gone.instance.id)
                .with_for_update()
            )
            await asyncio.wait_for(instances.end_orphans(impatient), timeout=3)
        async with ctx.db.read() as session:
            kept = await session.scalar(
                sa.select(InstanceRow.id).where(InstanceRow.id == gone.instance.id)
            )
        assert kept == gone.instance.id  # the held row was skipped, not deleted
        await instances.end_orphans(impatient)
        async with ctx.db.read() as session:
            left = await session.scalar(
                sa.select(InstanceRow.id).where(InstanceRow.id == gone.instance.id)
            )
        assert left is None  # the next sweep takes it


async def test_clean_stop_ends_own_live_conversations_sending_conversation_ended_once(
    ctx: Context,
) -> None:
    org = await listening_org(ctx)
    conversation_id = await live_on(ctx, org.org.id)
    await instances.stop(ctx)
    await instances.stop(ctx)
    assert await ended_once(ctx, org.org.id, conversation_id) == "shutdown"


async def test_racing_enders_on_two_instances_one_ended_by_one_event(
    ctx: Context, database_url: str
) -> None:
    org = await listening_org(ctx)
    conversation_id = await live_on(ctx, org.org.id)
    racers = [endings.API, endings.CLIENT_CLOSED, endings.ORPHAN, endings.TRANSFERRED]
    async with local_context(database_url, instance_id=unique_name("other")) as other:
        won = await asyncio.gather(
            *(
                endings.end_conversation(
                    on, org_id=org.org.id, conversation_id=conversation_id, ending=ending
                )
                for on, ending in zip([ctx, other, ctx, other], racers, strict=True)
            )
        )
    assert won.count(True) == 1
    winner = racers[won.index(True)]
    assert await ended_once(ctx, org.org.id, conversation_id) == winner.ended_by


async def test_every_ended_by_of_the_contract_has_an_ending() -> None:
    named = {
        value.ended_by for value in vars(endings).values() if isinstance(value, endings.Ending)
    }
    assert {str(each) for each in named} >= {
        "user", "assistant", "api", "timeout", "error", "shutdown", "busy", "no_answer",
        "failed", "voicemail", "transferred", "assistant_silence_limit_reached",
    }  # fmt: skip
