"""The issuer policies behind JWT verification (services/jwt_adapters.py: `IssuerDirectory`):
kept 2 s, refreshed ahead of that without making a request wait, one refresh shared by the
look-ups that need it, and a `forget` never undone by a refresh that read the old settings.
On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from parley.db.database import Database
from parley.db.session import Session
from parley.errors import Unavailable
from parley.jwt import IssuerPolicy, generate_key_pair
from parley.records import Actor
from parley.services import Context, jwt_config
from parley.services.jwt_adapters import POLICY_TTL_SECONDS, REFRESH_AHEAD, IssuerDirectory
from tests.stores.conftest import ManualClock
from tests.types import Tenant

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test")
ISSUER = "https://auth.example.com"


class GatedDatabase(Database):
    """The same database, whose read sessions (a policy's refresh) wait for a gate before
    they read, and for `after_read` once they have read."""

    def __init__(self, db: Database) -> None:
        super().__init__(db.engine, db.timeouts, read_engine=db.read_engine)
        self.driver = db.driver  # its pool is the wrapped database's, closed with it
        self.gate = asyncio.Event()
        self.after_read = asyncio.Event()
        self.after_read.set()
        self.reads = 0
        self.failing = False

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Session]:
        self.reads += 1
        await self.gate.wait()
        if self.failing:
            raise Unavailable()
        async with super().read() as session:
            yield session
        await self.after_read.wait()


@dataclasses.dataclass
class Directory:
    """An issuer directory holding the tenant's policy; its next refresh waits at the gate."""

    clock: ManualClock
    directory: IssuerDirectory
    db: GatedDatabase
    ctx: Context
    org_id: str

    def policy(self) -> asyncio.Future[IssuerPolicy | None]:
        return asyncio.ensure_future(self.directory.policy(ISSUER))

    async def configure(self, *, require_jti: bool) -> None:
        pair = generate_key_pair()
        config = jwt_config.JwtConfigInput(
            issuers=(ISSUER,),
            audience=None,
            jwks_url=None,
            public_keys=(pair.jwks,),
            require_jti=require_jti,
        )
        await jwt_config.put_jwt_config(self.ctx, org_id=self.org_id, config=config, actor=ACTOR)


@pytest.fixture
async def held(ctx: Context, tenant: Tenant) -> AsyncIterator[Directory]:
    clock = ManualClock()
    db = GatedDatabase(ctx.db)
    directory = IssuerDirectory(db=db, clock=clock, default_max_lifetime=3600)
    held = Directory(clock, directory, db, ctx, tenant.org.id)
    await held.configure(require_jti=False)
    db.gate.set()
    first = await held.policy()
    assert first is not None
    assert (first.org_id, first.require_jti) == (tenant.org.id, False)
    db.gate.clear()
    yield held
    db.gate.set()
    await asyncio.sleep(0.01)  # let a refresh left at the gate end


async def test_issuer_policy_refreshed_ahead_without_waiting(held: Directory) -> None:
    """Past REFRESH_AHEAD of the TTL a look-up answers from memory while the refresh runs
    beside it; past the TTL a look-up waits for that refresh."""
    held.clock.advance(POLICY_TTL_SECONDS * (REFRESH_AHEAD + 0.25))
    served = await asyncio.wait_for(held.policy(), 1)

    assert served is not None
    assert served.org_id == held.org_id
    await asyncio.sleep(0)
    assert held.db.reads == 2  # the refresh started ahead, held at the gate
    held.clock.advance(POLICY_TTL_SECONDS)
    waiting = held.policy()
    await asyncio.sleep(0.05)
    assert not waiting.done()
    held.db.gate.set()
    assert (await asyncio.wait_for(waiting, 1)) == served
    assert held.db.reads == 2


async def test_issuer_policy_refresh_shared_by_waiting_lookups(held: Directory) -> None:
    held.clock.advance(POLICY_TTL_SECONDS + 1)

    lookups = [held.policy() for _ in range(30)]
    await asyncio.sleep(0.05)
    held.db.gate.set()

    found = await asyncio.wait_for(asyncio.gather(*lookups), 1)
    assert {policy.org_id if policy else None for policy in found} == {held.org_id}
    assert held.db.reads == 2  # the first look-up's, then one for the thirty


async def test_issuer_policy_cancelled_lookup_leaves_shared_refresh_running(
    held: Directory,
) -> None:
    held.clock.advance(POLICY_TTL_SECONDS + 1)

    cancelled = held.policy()
    kept = held.policy()
    await asyncio.sleep(0.05)
    cancelled.cancel()
    held.db.gate.set()

    assert (await asyncio.wait_for(kept, 1)) is not None
    assert held.db.reads == 2


async def test_issuer_policy_failed_ahead_refresh_retried_by_next_lookup(
    held: Directory, caplog: pytest.LogCaptureFixture
) -> None:
    held.db.gate.set()
    held.db.failing = True
    held.clock.advance(POLICY_TTL_SECONDS * (REFRESH_AHEAD + 0.25))

    assert (await held.policy()) is not None  # served; the refresh ahead fails
    await asyncio.sleep(0.01)
    assert held.db.reads == 2
    held.clock.advance(POLICY_TTL_SECONDS)
    with pytest.raises(Unavailable):  # past the TTL the look-up needs the database
        await held.policy()
    held.db.failing = False

    assert (await held.policy()) is not None
    assert held.db.reads == 4
    assert "never retrieved" not in caplog.text


async def test_issuer_policy_forget_not_undone_by_refresh_in_flight(held: Directory) -> None:
    """A refresh that read the settings before they changed must not store them after the
    change's `forget`: the next look-up reads the new settings."""
    held.clock.advance(POLICY_TTL_SECONDS + 1)
    held.db.after_read.clear()
    held.db.gate.set()
    before_change = held.policy()  # its refresh reads the old settings, then waits
    await asyncio.sleep(0.05)

    await held.configure(require_jti=True)
    held.directory.forget(held.org_id)
    held.db.after_read.set()
    old = await asyncio.wait_for(before_change, 1)

    assert old is not None
    assert old.require_jti is False
    after = await asyncio.wait_for(held.policy(), 1)
    assert after is not None
    assert after.require_jti is True


async def test_issuer_policy_aclose_waits_for_refreshes_forget_left_running(
    held: Directory,
) -> None:
    held.clock.advance(POLICY_TTL_SECONDS * (REFRESH_AHEAD + 0.25))
    assert (await held.policy()) is not None  # served; a refresh starts ahead, at the gate
    await asyncio.sleep(0)
    held.directory.forget(held.org_id)  # no longer the issuer's current refresh

    closing = asyncio.ensure_future(held.directory.aclose())
    await asyncio.sleep(0.05)
    assert not closing.done()  # the refresh still waits at the gate
    held.db.gate.set()

    await asyncio.wait_for(closing, 1)
    assert held.db.reads == 2
