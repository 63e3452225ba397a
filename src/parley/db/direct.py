"""SQLite's direct connection, for SQLAlchemy: Core statements and whole units of work in
one thread hop (`Database.write_core_directly`, `Database.transact`).

Every statement through aiosqlite is a hop to its thread and back, and under load each hop
back waits for a turn of the busy event loop (about 0.4 ms): an audited change made six or
seven inside SQLite's writer turn. Here the statements run in the direct connection's own
thread, on a synchronous engine over that connection, so the repositories' statements
(and, through `run_units`, the services' async units of work) run unchanged.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.pool import StaticPool

from parley.db.errors import UniqueViolations, translated

T = TypeVar("T")


def core_engine_over(connection: sqlite3.Connection) -> Engine:
    """A synchronous engine whose one connection is `connection` (connected on first use,
    in the direct connection's thread); its transactions begin `IMMEDIATE`."""
    engine = create_sync_engine("sqlite://", creator=lambda: connection, poolclass=StaticPool)

    @event.listens_for(engine, "begin")
    def _on_begin(core: Connection) -> None:
        core.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def in_core_transaction(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run `work` in one transaction of `engine`: committed, or rolled back on error."""
    with engine.begin() as core:
        return work(core)


@dataclass(slots=True)
class Unit(Generic[T]):
    """A unit of work waiting for the next batch, and where its outcome goes."""

    work: Callable[[AsyncSession], Awaitable[T]]
    unique_violations: UniqueViolations | None
    answer: asyncio.Future[T]
    result: Any = None
    error: BaseException | None = None
    info: dict[Any, Any] = field(default_factory=dict)


def run_units(core: Connection, units: Sequence[Unit[Any]]) -> None:
    """Run each unit in a savepoint of `core`'s transaction, in order; a unit that fails
    rolls back to its savepoint and leaves the others. Outcomes are written on the units."""
    for unit in units:
        session = AsyncSession(join_transaction_mode="create_savepoint", expire_on_commit=False)
        session.sync_session.bind = core
        try:
            with translated(unit.unique_violations):
                unit.result = without_loop(unit.work(session))
                session.sync_session.commit()  # flushes, releases the savepoint
            unit.info = dict(session.info)
        except Exception as error:  # the unit's own failure: its savepoint is rolled back
            unit.error = error
        finally:
            session.sync_session.close()


def without_loop(awaitable: Awaitable[T]) -> T:
    """Run `awaitable` to its end without an event loop; it must never suspend."""
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    steps.close()
    raise RuntimeError("a direct transaction awaited something other than its session")
