"""The audit trail's hash chain: untouched it verifies; edited, deleted or reordered it
names the first bad event; concurrent events never fork it. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy import text

from parley.db.engine import create_engine
from parley.records import Actor
from parley.services import Context, api_keys, audit
from tests.factories import make_org

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test", client="127.0.0.1", request_id="req-1")


async def sql(database_url: str, statement: str, **params: object) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text(statement), params)
    finally:
        await engine.dispose()


async def org_with_events(ctx: Context, count: int) -> str:
    """An organization with `org.create`, `api_key.create` and `count` more events."""
    org = (await make_org(ctx)).org
    for n in range(count):
        await api_keys.create_api_key(ctx, org_id=org.id, name=f"k{n}", actor=ACTOR)
    return org.id


async def test_verify_untouched_chain_passes(ctx: Context) -> None:
    org_id = await org_with_events(ctx, 4)

    [report] = await audit.verify_chains(ctx, org_id=org_id)

    assert report.ok
    assert report.events == 6


async def test_record_links_each_event_to_the_one_before(ctx: Context) -> None:
    org_id = await org_with_events(ctx, 2)

    page = await audit.list_events(
        ctx, org_id=org_id, action=None, target=None, cursor=None, limit=100
    )
    events = list(reversed(page.items))

    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert events[0].prev_hash == audit.GENESIS_HASH
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.hash
    assert all(audit.chain_hash(e) == e.hash for e in events)


SWAP_3_AND_4 = [
    "UPDATE audit_events SET seq = -1 WHERE org_id = :org AND seq = 3",
    "UPDATE audit_events SET seq = 3 WHERE org_id = :org AND seq = 4",
    "UPDATE audit_events SET seq = 4 WHERE org_id = :org AND seq = -1",
]
TAMPERING: dict[str, tuple[list[str], int]] = {
    # name: (SQL run against the organization's chain, the first bad seq reported)
    "edited": (
        ["UPDATE audit_events SET target = 'key_forged' WHERE org_id = :org AND seq = 3"],
        3,
    ),
    "edited_actor": (
        ["UPDATE audit_events SET actor_id = 'key_other' WHERE org_id = :org AND seq = 2"],
        2,
    ),
    "deleted": (["DELETE FROM audit_events WHERE org_id = :org AND seq = 3"], 4),
    "deleted_newest": (["DELETE FROM audit_events WHERE org_id = :org AND seq = 5"], 5),
    "reordered": (SWAP_3_AND_4, 3),
}


@pytest.mark.parametrize("tampering", list(TAMPERING), ids=list(TAMPERING))
async def test_verify_tampered_chain_reports_first_bad_event(
    ctx: Context, database_url: str, tampering: str
) -> None:
    org_id = await org_with_events(ctx, 3)
    untouched = await org_with_events(ctx, 1)
    statements, first_bad = TAMPERING[tampering]

    for statement in statements:
        await sql(database_url, statement, org=org_id)
    reports = {r.org_id: r for r in await audit.verify_chains(ctx)}

    bad = reports[org_id].first_bad
    assert bad is not None
    assert bad.seq == first_bad
    assert reports[untouched].ok


async def test_record_concurrent_events_do_not_fork_chain(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    makers: list[Callable[[], Awaitable[object]]] = [
        lambda n=n: api_keys.create_api_key(ctx, org_id=org_id, name=f"c{n}", actor=ACTOR)
        for n in range(12)
    ]

    await asyncio.gather(*(make() for make in makers))
    [report] = await audit.verify_chains(ctx, org_id=org_id)

    assert report.ok
    assert report.events == 14


async def test_record_unknown_action_refused(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    with pytest.raises(ValueError, match="unknown audit action"):
        async with ctx.db.transaction() as session:
            await audit.record(
                session, ctx, org_id=org_id, actor=ACTOR, action="agent.teleport", target="x"
            )
