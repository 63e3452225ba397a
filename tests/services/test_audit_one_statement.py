"""Audit events appended under a guard (services/audit.py rule 4, issue #23): the split
canonical form hashes as the whole one does, a disable or enable that changes nothing is
one statement under the chain's lock on PostgreSQL and one thread hop of Core statements
on SQLite, its guard is checked again under that lock, and the chain never forks or
breaks. The public behaviour on SQLite and PostgreSQL; the lock waits on PostgreSQL (SQLite
has one writer at a time)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from parley.db.database import Database, mark_changed
from parley.db.engine import create_engine
from parley.db.repos import agents as agent_repo
from parley.db.repos import audit as audit_repo
from parley.errors import Forbidden
from parley.records import Actor, AuditEvent
from parley.services import Context, agents, audit
from tests.factories import make_agent, make_org

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test", client="127.0.0.1", request_id="req-1")
POSTGRES_ONLY = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def an_event(**details: object) -> AuditEvent:
    return AuditEvent(
        org_id="org_1",
        seq=1234,
        action="agent.disable",
        target="agent_x",
        actor_kind="api_key",
        actor_id=None,
        client="ünïcode ✓",
        request_id=None,
        details=details,
        created_at=datetime(2026, 11, 28, 12, 0, 0, 123456, tzinfo=UTC),
        prev_hash="a" * 64,
        hash="",
    )


@pytest.mark.parametrize(
    "details",
    [{}, {"name": "n", "changed": False}, {"seq": 0, "target": "t", "z": {"seq": 1}}],
    ids=["none", "disable", "seq_inside_details"],
)
def test_canonical_parts_reassemble_canonical_form(details: dict[str, object]) -> None:
    event = an_event(**details)

    before, after = audit.canonical_parts(event)

    assert before + str(event.seq).encode() + after == audit.canonical_form(event)


async def chain_events(ctx: Context, org_id: str) -> list[AuditEvent]:
    page = await audit.list_events(
        ctx, org_id=org_id, action=None, target=None, cursor=None, limit=100
    )
    return list(reversed(page.items))


async def test_unchanged_disable_and_enable_recorded_in_verifiable_chain(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    calls = [agents.disable_agent, agents.disable_agent, agents.enable_agent, agents.enable_agent]

    for call in calls:
        await call(ctx, org_id=org_id, ref=agent.name, project=None, actor=ACTOR)
    events = (await chain_events(ctx, org_id))[-4:]
    [report] = await audit.verify_chains(ctx, org_id=org_id)

    assert [(e.action, e.details["changed"]) for e in events] == [
        ("agent.disable", True),
        ("agent.disable", False),
        ("agent.enable", True),
        ("agent.enable", False),
    ]
    assert all(e.target == agent.id and e.details["name"] == agent.name for e in events)
    assert report.ok


async def test_concurrent_unchanged_and_changing_calls_do_not_fork_chain(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await agents.disable_agent(ctx, org_id=org_id, ref=agent.id, project=None, actor=ACTOR)
    before = len(await chain_events(ctx, org_id))
    calls = [agents.disable_agent] * 10 + [agents.enable_agent] * 3 + [agents.disable_agent] * 5

    await asyncio.gather(
        *(call(ctx, org_id=org_id, ref=agent.name, project=None, actor=ACTOR) for call in calls)
    )
    events = (await chain_events(ctx, org_id))[before:]
    [report] = await audit.verify_chains(ctx, org_id=org_id)

    assert report.ok
    assert len(events) == len(calls)
    state = True  # disabled before the burst: each event's `changed` must follow the state
    for recorded in events:
        wants_disabled = recorded.action == "agent.disable"
        assert recorded.details["changed"] is (state != wants_disabled)
        state = wants_disabled


@contextmanager
def statements_of(database: Database) -> Iterator[list[tuple[str, bool]]]:
    """Every statement `database` runs for the task that entered the block, each with
    whether it ran outside any transaction: through the engine, a connection in AUTOCOMMIT
    (asyncpg sends no `BEGIN` and no `COMMIT`); on asyncpg directly (`DriverStatements`),
    always (each statement commits on its own: tests/db/test_driver.py).

    Statements of other tasks (the replay guard's sweep of spent `jti` records runs on a
    timer of its own) are not the block's: SQLAlchemy's async bridge runs the cursor inside
    the awaiting task, so `asyncio.current_task()` tells whose each statement is."""
    seen: list[tuple[str, bool]] = []
    mine = asyncio.current_task()

    def note(connection: Connection, _cursor: object, statement: str, *_: object) -> None:
        if asyncio.current_task() is not mine:
            return
        options = connection.get_execution_options()
        seen.append((statement, options.get("isolation_level") == "AUTOCOMMIT"))

    def note_direct(statement: str) -> None:
        if asyncio.current_task() is mine:
            seen.append((statement, True))

    engine = database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    if database.driver is not None:
        database.driver.observe(note_direct)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)
        if database.driver is not None:
            database.driver.observe(None)


@POSTGRES_ONLY
@pytest.mark.parametrize("by", ["name", "id"])
async def test_unchanged_disable_is_one_statement_outside_any_transaction(
    ctx: Context, by: str
) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    ref = agent.name if by == "name" else agent.id
    await agents.disable_agent(ctx, org_id=org_id, ref=ref, project=None, actor=ACTOR)

    with statements_of(ctx.db) as seen:
        await agents.disable_agent(ctx, org_id=org_id, ref=ref, project=None, actor=ACTOR)
    [last] = (await chain_events(ctx, org_id))[-1:]

    assert len(seen) == (1 if by == "name" else 2)  # by ID: its name is read first
    assert all(outside for _, outside in seen)
    statement = seen[-1][0]
    for part in ("FOR SHARE", "FOR UPDATE", "INSERT INTO audit_events", "UPDATE audit_heads"):
        assert part in statement
    assert (last.action, last.target, last.details) == (
        "agent.disable",
        agent.id,
        {"name": agent.name, "changed": False},
    )
    assert (await audit.verify_chains(ctx, org_id=org_id))[0].ok


async def test_unchanged_disable_of_other_organizations_agent_forbidden(ctx: Context) -> None:
    owner = (await make_org(ctx)).org.id
    other = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, owner)
    await agents.disable_agent(ctx, org_id=owner, ref=agent.id, project=None, actor=ACTOR)
    before = await chain_events(ctx, other)

    with pytest.raises(Forbidden):
        await agents.disable_agent(ctx, org_id=other, ref=agent.id, project=None, actor=ACTOR)

    assert await chain_events(ctx, other) == before


@asynccontextmanager
async def another_transaction(database_url: str) -> AsyncIterator[AsyncConnection]:
    """A transaction on a connection of its own, committed when the block ends."""
    other = create_engine(database_url)
    try:
        async with other.begin() as connection:
            yield connection
    finally:
        await other.dispose()


async def guarded(ctx: Context, org_id: str, agent_id: str, *, disabled: bool) -> AuditEvent | None:
    return await audit.record_guarded(
        ctx,
        org_id=org_id,
        actor=ACTOR,
        action="agent.disable",
        details={"changed": False},
        guard=agent_repo.in_state(org_id, agent_id, disabled=disabled),
    )


async def test_guarded_append_writes_nothing_when_guard_fails(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)  # enabled
    before = await chain_events(ctx, org_id)

    appended = await guarded(ctx, org_id, agent.id, disabled=True)

    assert appended is None
    assert await chain_events(ctx, org_id) == before


@POSTGRES_ONLY
async def test_guarded_append_rechecks_guard_after_waiting_for_its_row(
    ctx: Context, database_url: str
) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await agents.disable_agent(ctx, org_id=org_id, ref=agent.id, project=None, actor=ACTOR)
    before = await chain_events(ctx, org_id)

    async with another_transaction(database_url) as connection:  # an enable, uncommitted
        await connection.execute(
            text("UPDATE agents SET disabled_at = NULL WHERE id = :id"), {"id": agent.id}
        )
        waiting = asyncio.ensure_future(guarded(ctx, org_id, agent.id, disabled=True))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # blocked on the agent's row
    appended = await asyncio.wait_for(waiting, 10)

    assert appended is None
    assert await chain_events(ctx, org_id) == before


@POSTGRES_ONLY
async def test_guarded_append_links_to_head_committed_while_it_waited(
    ctx: Context, database_url: str
) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await agents.disable_agent(ctx, org_id=org_id, ref=agent.id, project=None, actor=ACTOR)
    async with ctx.db.read() as session:
        seq, _ = await audit_repo.head_of(session, org_id) or (0, "")

    async with another_transaction(database_url) as connection:  # holds the head, moves it
        await connection.execute(
            text("SELECT seq FROM audit_heads WHERE org_id = :org FOR UPDATE"), {"org": org_id}
        )
        waiting = asyncio.ensure_future(guarded(ctx, org_id, agent.id, disabled=True))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # blocked on the head
        await connection.execute(
            text("UPDATE audit_heads SET seq = seq + 1, hash = :h WHERE org_id = :org"),
            {"org": org_id, "h": "b" * 64},
        )
    appended = await asyncio.wait_for(waiting, 10)

    assert appended is not None
    assert (appended.seq, appended.prev_hash, appended.target) == (seq + 2, "b" * 64, agent.id)
    assert appended.hash == audit.chain_hash(appended)


async def test_guarded_append_announces_no_change(ctx: Context) -> None:
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    await agents.disable_agent(ctx, org_id=org_id, ref=agent.id, project=None, actor=ACTOR)
    heard: list[frozenset[str]] = []
    ctx.db.add_commit_listener(heard.append)

    appended = await guarded(ctx, org_id, agent.id, disabled=True)

    assert appended is not None
    assert heard == []
    assert (await audit.verify_chains(ctx, org_id=org_id))[0].ok


SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
@pytest.mark.parametrize("by", ["name", "id"])
async def test_unchanged_disable_on_sqlite_is_one_hop_without_orm_session(
    ctx: Context, by: str, monkeypatch: pytest.MonkeyPatch, timer_stopped: None
) -> None:
    """The instance's timer is stopped first: its lease renewal is a transaction of its own
    that could land among the hops counted."""
    org_id = (await make_org(ctx)).org.id
    agent = await make_agent(ctx, org_id)
    ref = agent.name if by == "name" else agent.id
    await agents.disable_agent(ctx, org_id=org_id, ref=ref, project=None, actor=ACTOR)
    hops: list[str] = []
    for name in ("write_core_directly", "transact", "transaction", "write_directly"):
        original = getattr(ctx.db, name)

        def counted(*args: object, _name: str = name, _original: object = original) -> object:
            hops.append(_name)
            return _original(*args)  # type: ignore[operator]

        monkeypatch.setattr(ctx.db, name, counted)

    await agents.disable_agent(ctx, org_id=org_id, ref=ref, project=None, actor=ACTOR)
    [last] = (await chain_events(ctx, org_id))[-1:]

    assert hops == ["write_core_directly"]  # one hop, Core statements: no unit of work
    assert (last.action, last.target, last.details) == (
        "agent.disable",
        agent.id,
        {"name": agent.name, "changed": False},
    )
    assert last.hash == audit.chain_hash(last)
    assert (await audit.verify_chains(ctx, org_id=org_id))[0].ok


@POSTGRES_ONLY
async def test_autocommit_tells_commit_listeners_what_changed(ctx: Context) -> None:
    heard: list[frozenset[str]] = []
    ctx.db.add_commit_listener(heard.append)

    async with ctx.db.autocommit() as writer:
        await writer.execute(text("SELECT 1"))
        mark_changed(writer, "org_a")

    async def failing() -> None:
        async with ctx.db.autocommit() as writer:
            mark_changed(writer, "org_b")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        await failing()

    assert heard == [frozenset({"org_a"})]


async def test_autocommit_only_on_postgresql(database_url: str) -> None:
    db = Database.from_url(database_url)
    try:
        if db.dialect == "sqlite":
            with pytest.raises(RuntimeError, match="PostgreSQL"):
                async with db.autocommit():
                    pass
        else:
            async with db.autocommit() as writer:
                assert (await writer.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await db.dispose()
