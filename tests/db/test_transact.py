"""`Database.transact`: a unit of work as one transaction; on SQLite one thread hop on the
direct connection, with the commit's listeners and callbacks as `transaction()` has them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from tests.db.writer import writer_turn_held

from parley.db import database as database_module
from parley.db.database import Database, after_commit, mark_changed
from parley.db.direct import Unit, run_units
from parley.db.session import DirectConnection
from parley.db.tables import JtiClaimRow
from parley.errors import NameTaken

pytestmark = pytest.mark.anyio


async def _claims(database: Database, key: str) -> int:
    async with database.read() as session:
        count = await session.scalar(
            select(func.count()).select_from(JtiClaimRow).where(JtiClaimRow.key == key)
        )
        return int(count or 0)


async def test_transact_on_sqlite_runs_in_the_direct_thread_and_commits(
    database: Database,
) -> None:
    threads: list[str] = []

    async def unit(session: AsyncSession) -> str:
        threads.append(threading.current_thread().name)
        session.add(JtiClaimRow(key="transact", expires_at=1.0))
        await session.flush()
        found = await session.scalar(select(JtiClaimRow.key).where(JtiClaimRow.key == "transact"))
        return str(found)

    assert await database.transact(unit) == "transact"
    assert await _claims(database, "transact") == 1
    if database.dialect == "sqlite":
        assert threads[0].startswith("parley-sqlite-direct")
    else:
        assert threads == [threading.current_thread().name]


async def test_transact_tells_commit_listeners_then_runs_callbacks_in_the_loop(
    database: Database,
) -> None:
    heard: list[object] = []
    database.add_commit_listener(lambda orgs: heard.append(sorted(orgs)))
    loop_thread = threading.current_thread().name

    async def unit(session: AsyncSession) -> None:
        session.add(JtiClaimRow(key="listened", expires_at=1.0))
        mark_changed(session, "org_a")
        after_commit(session, lambda: heard.append(threading.current_thread().name))

    await database.transact(unit)
    assert heard == [["org_a"], loop_thread]


async def test_transact_rolls_back_on_error_and_tells_no_one(database: Database) -> None:
    heard: list[object] = []
    database.add_commit_listener(heard.append)

    async def unit(session: AsyncSession) -> None:
        session.add(JtiClaimRow(key="halfway", expires_at=1.0))
        await session.flush()
        mark_changed(session, "org_a")
        after_commit(session, lambda: heard.append("callback"))
        raise LookupError("halfway")

    with pytest.raises(LookupError):
        await database.transact(unit)
    assert await _claims(database, "halfway") == 0
    assert heard == []


@pytest.mark.parametrize("pause", [0, 0.001], ids=["yield", "timer"])
async def test_transact_on_sqlite_refuses_a_unit_that_awaits_something_else(
    database: Database, pause: float
) -> None:
    """A unit that yields to the event loop, or needs it, cannot run in the direct thread:
    it is refused and what it wrote is rolled back (PostgreSQL runs it in a session, so it
    commits)."""

    async def unit(session: AsyncSession) -> None:
        session.add(JtiClaimRow(key="waited", expires_at=1.0))
        await session.flush()
        await asyncio.sleep(pause)

    if database.dialect == "sqlite":
        refused = "awaited something other than its session|no running event loop"
        with pytest.raises(RuntimeError, match=refused):
            await database.transact(unit)
        assert await _claims(database, "waited") == 0
    else:
        await database.transact(unit)
        assert await _claims(database, "waited") == 1


async def test_transact_on_sqlite_units_arriving_together_share_one_batch_and_fail_alone(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units queued while the writer is busy run as one batch (one hop, one transaction),
    in order, each in its own savepoint: the one that fails (here a duplicate key, mapped
    to its Conflict) rolls back alone."""
    database = sqlite_database
    batches: list[int] = []

    def counted(core: DirectConnection, units: Sequence[Unit[Any]]) -> None:
        batches.append(len(units))
        run_units(core, units)

    monkeypatch.setattr(database_module, "run_units", counted)
    await database.transact(_claim("taken"))
    async with writer_turn_held(database):
        first = asyncio.ensure_future(database.transact(_claim("first")))
        duplicate = asyncio.ensure_future(
            database.transact(_claim("taken"), {"jti_claims.key": NameTaken})
        )
        last = asyncio.ensure_future(database.transact(_claim("last")))
        await asyncio.sleep(0.02)

    assert await first == "first"
    with pytest.raises(NameTaken):
        await duplicate
    assert await last == "last"
    assert batches == [1, 3]
    assert [await _claims(database, key) for key in ("first", "taken", "last")] == [1, 1, 1]


async def test_transact_on_sqlite_cancelled_before_its_batch_leaves_its_unit_unrun(
    sqlite_database: Database,
) -> None:
    database = sqlite_database
    async with writer_turn_held(database):
        cancelled = asyncio.ensure_future(database.transact(_claim("cancelled")))
        kept = asyncio.ensure_future(database.transact(_claim("kept")))
        await asyncio.sleep(0.02)
        cancelled.cancel()

    assert await kept == "kept"
    assert cancelled.cancelled()
    assert (await _claims(database, "cancelled"), await _claims(database, "kept")) == (0, 1)


def _claim(key: str) -> Callable[[AsyncSession], Awaitable[str]]:
    async def unit(session: AsyncSession) -> str:
        session.add(JtiClaimRow(key=key, expires_at=1.0))
        await session.flush()
        return key

    return unit
