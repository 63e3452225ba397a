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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine, Executable, FrozenResult, Result, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.pool import SingletonThreadPool, StaticPool

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


class DirectReads:
    """SQLite's one-statement reads (`Database.statement()`), each one thread hop.

    Through aiosqlite one `SELECT` is four or five hops (a cursor, the statement, the
    fetch, closing the cursor, the pool's reset), and under load each hop back waits for a
    turn of the busy event loop: the JWT conversation read was bound by them, not by its
    CPU (docs/performance.md). Here the statement runs, and its rows are fetched, in one
    call to a reading thread, on that thread's own read-only connection (`engine`, a
    synchronous engine: same dialect, same column types); the rows come back buffered.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], threads: int) -> None:
        self._threads = threads
        self._executor: ThreadPoolExecutor | None = None  # started by the first read
        # SingletonThreadPool: one connection per reading thread, kept for the next read.
        self.engine = create_sync_engine(
            "sqlite://", creator=connect, poolclass=SingletonThreadPool, pool_size=threads
        )

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> Result[Any]:
        """Run `statement` (one `SELECT`); return its rows."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._threads, "parley-sqlite-read")
        loop = asyncio.get_running_loop()
        frozen = await loop.run_in_executor(self._executor, self._read, statement, parameters)
        return frozen()

    def _read(
        self, statement: Executable, parameters: Mapping[str, Any] | None
    ) -> FrozenResult[Any]:
        with self.engine.connect() as core:
            return core.execute(statement, parameters).freeze()

    def close(self) -> None:
        """Close every reading thread's connection, once the threads are done; a later
        read starts afresh."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self.engine.dispose()
