"""The read model on one process (services/read_model.py, issue #23): agents from memory,
dropped at once by a change made here, and within the bound by a change nobody announced."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager

import pytest

from parley.db.database import Database
from parley.db.session import StatementConnection
from parley.errors import Unavailable
from parley.records import Actor, Agent, AgentPatch
from parley.services import Context, agents
from parley.services.read_model import BOUND_SECONDS, REFRESH_AHEAD, ReadModel
from parley.stores.memory import MemoryChangeFeed
from tests.factories import make_agent, make_tool
from tests.stores.conftest import ManualClock
from tests.types import Tenant

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test")


@pytest.fixture
async def elsewhere(ctx: Context, database_url: str) -> AsyncIterator[Context]:
    """Another process's view of the same database: its commits tell nobody here."""
    db = Database.from_url(database_url)
    try:
        yield dataclasses.replace(ctx, db=db, read_model=ReadModel())
    finally:
        await db.dispose()


def _model_context(ctx: Context, clock: ManualClock, **options: int) -> Context:
    return dataclasses.replace(ctx, read_model=ReadModel(clock=clock, **options))


async def test_read_model_known_agent_needs_no_database_read(
    ctx: Context, tenant: Tenant, statements: list[str]
) -> None:
    agent = await make_agent(ctx, tenant.org.id)
    assert (await tenant.client.get(f"/v1/agents/{agent.name}")).status_code == 200
    statements.clear()

    answer = await tenant.client.get(f"/v1/agents/{agent.name}")

    assert answer.status_code == 200
    assert answer.json()["agent"]["id"] == agent.id
    tables = ("agents", "projects", "phone_numbers", "api_keys", "audit_heads")
    assert not [s for s in statements if any(table in s for table in tables)], statements


async def test_read_model_disable_seen_at_once(ctx: Context, tenant: Tenant) -> None:
    agent = await make_agent(ctx, tenant.org.id)
    path = f"/v1/agents/{agent.name}"
    assert (await tenant.client.get(path)).json()["agent"]["is_disabled"] is False

    assert (await tenant.client.post(f"{path}/disable")).status_code == 200

    assert (await tenant.client.get(path)).json()["agent"]["is_disabled"] is True


async def test_read_model_phone_numbers_and_tools_changes_seen_at_once(
    ctx: Context, tenant: Tenant
) -> None:
    tool = (await make_tool(ctx, tenant.org.id, name="lookup")).tool
    agent = await make_agent(ctx, tenant.org.id, tools=(tool.name,))
    path = f"/v1/agents/{agent.name}"
    assert (await tenant.client.get(path)).json()["agent"]["tools"] == ["lookup"]

    patched = await tenant.client.patch(path, json={"phone_numbers": ["+15550100"]})
    assert patched.status_code == 200, patched.text
    assert (await tenant.client.get(path)).json()["agent"]["phone_numbers"] == ["+15550100"]
    renamed = await tenant.client.patch(f"/v1/tools/{tool.id}", json={"name": "find"})
    assert renamed.status_code == 200, renamed.text

    assert (await tenant.client.get(path)).json()["agent"]["tools"] == ["find"]


async def test_read_model_agent_list_sees_created_and_deleted_agents_at_once(
    ctx: Context, tenant: Tenant
) -> None:
    first = await make_agent(ctx, tenant.org.id)
    names = lambda answer: [a["name"] for a in answer.json()["agents"]]  # noqa: E731
    assert names(await tenant.client.get("/v1/agents")) == [first.name]

    made = await tenant.client.post("/v1/agents", json={"name": "second", "welcome_message": None})
    assert made.status_code == 201, made.text
    assert sorted(names(await tenant.client.get("/v1/agents"))) == sorted([first.name, "second"])
    assert (await tenant.client.delete(f"/v1/agents/{first.name}")).status_code == 200

    assert names(await tenant.client.get("/v1/agents")) == ["second"]


async def test_read_model_unannounced_change_seen_within_bound(
    ctx: Context, tenant: Tenant, elsewhere: Context
) -> None:
    """A change whose announcement is lost (made by a process that publishes nothing) is
    served stale for at most BOUND_SECONDS: then the generation check drops the copies."""
    clock = ManualClock()
    here = _model_context(ctx, clock)
    agent = await make_agent(ctx, tenant.org.id)
    assert (await _get(here, tenant, agent)).disabled_at is None

    await agents.disable_agent(
        elsewhere, org_id=tenant.org.id, ref=agent.name, project=None, actor=ACTOR
    )
    clock.advance(BOUND_SECONDS / 2)
    assert (await _get(here, tenant, agent)).disabled_at is None  # nobody told this process
    clock.advance(BOUND_SECONDS / 2 + 0.01)

    assert (await _get(here, tenant, agent)).disabled_at is not None


async def test_read_model_unchanged_generation_keeps_copies(
    ctx: Context, tenant: Tenant, statements: list[str]
) -> None:
    clock = ManualClock()
    here = _model_context(ctx, clock)
    agent = await make_agent(ctx, tenant.org.id)
    await _get(here, tenant, agent)
    clock.advance(BOUND_SECONDS + 1)
    statements.clear()

    await _get(here, tenant, agent)

    assert len([s for s in statements if "audit_heads" in s]) == 1, statements
    assert not [s for s in statements if "agents" in s], statements


async def test_read_model_announcement_drops_copies(ctx: Context, tenant: Tenant) -> None:
    feed = MemoryChangeFeed()
    here = dataclasses.replace(ctx, read_model=ReadModel(feed))
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        return loads

    assert await here.read_model.get(ctx.db, tenant.org.id, "k", load) == 1
    assert await here.read_model.get(ctx.db, tenant.org.id, "k", load) == 1
    await feed.publish(tenant.org.id)  # what another instance's commit sends
    assert await here.read_model.get(ctx.db, tenant.org.id, "k", load) == 2
    await here.read_model.aclose()


async def test_read_model_change_during_load_not_kept(ctx: Context, tenant: Tenant) -> None:
    agent = await make_agent(ctx, tenant.org.id)
    here = dataclasses.replace(ctx, read_model=ReadModel())

    async def load_then_change() -> Agent:
        loaded = await agents.get_agent(ctx, org_id=tenant.org.id, ref=agent.id, project=None)
        await agents.update_agent(
            ctx,
            org_id=tenant.org.id,
            ref=agent.id,
            project=None,
            patch=AgentPatch(system_prompt="Changed."),
            actor=ACTOR,
        )
        return loaded

    stale = await here.read_model.get(ctx.db, tenant.org.id, "agent", load_then_change)
    assert stale.system_prompt == "Be brief."
    fresh = await here.read_model.get(
        ctx.db,
        tenant.org.id,
        "agent",
        lambda: agents.get_agent(ctx, org_id=tenant.org.id, ref=agent.id, project=None),
    )

    assert fresh.system_prompt == "Changed."


async def test_read_model_bounded_in_organizations_and_entries(
    ctx: Context, tenant: Tenant, other_tenant: Tenant
) -> None:
    model = ReadModel(max_orgs=1, max_entries=1)
    loads: list[str] = []

    async def load(name: str) -> str:
        loads.append(name)
        return name

    await model.get(ctx.db, tenant.org.id, "a", lambda: load("a"))
    await model.get(ctx.db, tenant.org.id, "b", lambda: load("b"))  # drops "a"
    await model.get(ctx.db, tenant.org.id, "a", lambda: load("a"))
    await model.get(ctx.db, other_tenant.org.id, "c", lambda: load("c"))  # drops the first org
    await model.get(ctx.db, tenant.org.id, "a", lambda: load("a"))

    assert loads == ["a", "b", "a", "c", "a"]


class GatedDatabase(Database):
    """The same database, whose point reads (the generation check) wait for a gate."""

    def __init__(self, db: Database) -> None:
        super().__init__(db.engine, db.timeouts, read_engine=db.read_engine)
        self.driver = db.driver  # its pool is the wrapped database's, closed with it
        self.gate = asyncio.Event()
        self.checks = 0
        self.failing = False

    @asynccontextmanager
    async def point_read(self) -> AsyncIterator[StatementConnection]:
        self.checks += 1
        await self.gate.wait()
        if self.failing:
            raise Unavailable()
        async with super().point_read() as connection:
            yield connection


async def _value() -> str:
    return "value"


@dataclasses.dataclass
class Gated:
    """A read model holding one entry, whose next generation check waits at `db.gate`."""

    clock: ManualClock
    model: ReadModel
    db: GatedDatabase
    org_id: str

    def read(self) -> Awaitable[str]:
        return self.model.get(self.db, self.org_id, "k", _value)


@pytest.fixture
async def gated(ctx: Context, tenant: Tenant) -> AsyncIterator[Gated]:
    clock = ManualClock()
    model = ReadModel(clock=clock)
    db = GatedDatabase(ctx.db)
    db.gate.set()
    await model.get(db, tenant.org.id, "k", _value)
    db.gate.clear()
    yield Gated(clock, model, db, tenant.org.id)
    db.gate.set()
    await model.aclose()


async def test_read_model_generation_checked_ahead_without_waiting(gated: Gated) -> None:
    """Past REFRESH_AHEAD of the bound, a read is served from memory while the next check
    runs beside it; past the bound, a read waits for the check."""
    gated.clock.advance(BOUND_SECONDS * (REFRESH_AHEAD + 0.25))
    served = await asyncio.wait_for(gated.read(), 1)

    assert served == "value"
    await asyncio.sleep(0)
    assert gated.db.checks == 2  # the check started ahead, held at the gate
    gated.clock.advance(BOUND_SECONDS)  # past the bound: the read waits for that check
    waiting = asyncio.ensure_future(gated.read())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    gated.db.gate.set()
    assert await asyncio.wait_for(waiting, 1) == "value"


async def test_read_model_generation_check_shared_by_waiting_reads(gated: Gated) -> None:
    gated.clock.advance(BOUND_SECONDS + 1)

    reads = [asyncio.ensure_future(gated.read()) for _ in range(10)]
    await asyncio.sleep(0.05)
    gated.db.gate.set()

    assert await asyncio.wait_for(asyncio.gather(*reads), 1) == ["value"] * 10
    assert gated.db.checks == 2  # the first load's, then one for the ten reads


async def test_read_model_cancelled_read_leaves_shared_check_running(gated: Gated) -> None:
    gated.clock.advance(BOUND_SECONDS + 1)

    cancelled = asyncio.ensure_future(gated.read())
    kept = asyncio.ensure_future(gated.read())
    await asyncio.sleep(0.05)
    cancelled.cancel()
    gated.db.gate.set()

    assert await asyncio.wait_for(kept, 1) == "value"
    assert gated.db.checks == 2


async def test_read_model_failed_ahead_check_retried_by_next_read(
    gated: Gated, caplog: pytest.LogCaptureFixture
) -> None:
    """A check started ahead that fails costs nothing: the read was already served, and
    the first read past the bound runs its own."""
    gated.db.gate.set()
    gated.db.failing = True
    gated.clock.advance(BOUND_SECONDS * (REFRESH_AHEAD + 0.25))

    assert await gated.read() == "value"
    await asyncio.sleep(0.01)  # the check ahead fails
    assert gated.db.checks == 2
    gated.db.failing = False
    gated.clock.advance(BOUND_SECONDS)

    assert await gated.read() == "value"
    assert gated.db.checks == 3
    assert "never retrieved" not in caplog.text


async def _get(here: Context, tenant: Tenant, agent: Agent) -> Agent:
    return await agents.get_agent(here, org_id=tenant.org.id, ref=agent.name, project=None)


async def test_read_model_concurrent_misses_share_one_load(ctx: Context, tenant: Tenant) -> None:
    """Rule 6: the reads that miss one entry together await one load (after a burst of
    changes, every read in flight misses at once), and get its value."""
    here = dataclasses.replace(ctx, read_model=ReadModel())
    agent = await make_agent(ctx, tenant.org.id)
    loads = 0
    started, gate = asyncio.Event(), asyncio.Event()

    async def load() -> Agent:
        nonlocal loads
        loads += 1
        started.set()
        await gate.wait()  # every read below arrives while this load runs
        return await agents.get_agent(ctx, org_id=tenant.org.id, ref=agent.id, project=None)

    reads = [
        asyncio.ensure_future(here.read_model.get(ctx.db, tenant.org.id, "agent", load))
        for _ in range(20)
    ]
    await started.wait()  # the first load runs: every read has found the entry missing
    gate.set()
    got = await asyncio.gather(*reads)

    assert loads == 1
    assert {a.id for a in got} == {agent.id}
    await here.read_model.aclose()


async def test_read_model_shared_load_error_reaches_each_read_and_is_not_kept(
    ctx: Context, tenant: Tenant
) -> None:
    """A shared load that fails fails every read waiting for it (rule 5: nothing kept), and
    the next read loads afresh."""
    here = dataclasses.replace(ctx, read_model=ReadModel())
    agent = await make_agent(ctx, tenant.org.id)
    started, gate = asyncio.Event(), asyncio.Event()
    loads = 0

    async def failing() -> Agent:
        nonlocal loads
        loads += 1
        started.set()
        await gate.wait()
        raise Unavailable()

    reads = [
        asyncio.ensure_future(here.read_model.get(ctx.db, tenant.org.id, "agent", failing))
        for _ in range(5)
    ]
    await started.wait()  # the first load runs: every read has found the entry missing
    gate.set()
    outcomes = await asyncio.gather(*reads, return_exceptions=True)
    assert [type(o) for o in outcomes] == [Unavailable] * 5
    assert loads == 1

    fresh = await here.read_model.get(
        ctx.db,
        tenant.org.id,
        "agent",
        lambda: agents.get_agent(ctx, org_id=tenant.org.id, ref=agent.id, project=None),
    )
    assert fresh.id == agent.id
    await here.read_model.aclose()
