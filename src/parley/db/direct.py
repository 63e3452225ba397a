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
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from parley.db.errors import UniqueViolations, translated
from parley.db.plans import Plan, Plans

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


class InlineReads:
    """SQLite's bounded reads (`Database.point_read()`) in the event loop's own thread.

    A `SELECT` that an index answers with a few rows takes SQLite microseconds; the thread
    hop of `DirectReads` costs the process more than the read (the executor's futures, the
    loop's wake-up, and SQLAlchemy's execution in the thread, all under the GIL): on two
    cores the GIL, not the loop, bounded the WebSocket handshake and the JWT read
    (docs/performance.md). A WAL reader never waits for the writer, so the read runs here,
    on a read-only connection of the loop's own. A statement whose values and columns need
    no conversion (text, integers) runs on sqlite3 alone, compiled once; any other through
    a synchronous engine over the same connection (same dialect, same column types). Should
    SQLite ever answer busy (a WAL being recovered), the read takes the thread hop instead
    of waiting in the loop.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], fallback: DirectReads) -> None:
        self._connect = connect
        self._fallback = fallback
        self._connection: sqlite3.Connection | None = None  # opened by the first read
        self._engine: Engine | None = None  # over that connection, made with it
        self._plans = Plans(_SQLITE)
        self._observer: Callable[[str], None] | None = None

    def observe(self, observer: Callable[[str], None] | None) -> None:
        """Hand `observer` the SQL of each statement run here (sqlite3's trace callback),
        on the connection open now and on any opened later; None stops it."""
        self._observer = observer
        if self._connection is not None:
            self._connection.set_trace_callback(observer)

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None
    ) -> Result[Any]:
        """Run `statement` (one bounded `SELECT`); return its rows."""
        connection = self._connection or await self._open()
        plan = self._plans(statement)
        try:
            if not _plain(plan):
                with self._over(connection).connect() as core:
                    return core.execute(statement, parameters).freeze()()
            cursor = connection.execute(plan.sql, plan.values(parameters))
            rows = cursor.fetchall()
        except (sqlite3.OperationalError, OperationalError) as error:
            cause = getattr(error, "orig", error)
            code = getattr(cause, "sqlite_errorcode", 0) & 0xFF  # extended: BUSY_RECOVERY…
            if code not in _BUSY:
                raise
            return await self._fallback.execute(statement, parameters)
        keys = [column[0] for column in cursor.description]
        return IteratorResult(SimpleResultMetaData(keys), iter(rows))

    async def _open(self) -> sqlite3.Connection:
        """Open the connection in a thread (its pragmas may wait for a lock), once."""
        opened = await asyncio.to_thread(self._connect)
        if self._connection is not None:  # another read opened it meanwhile
            opened.close()
            return self._connection
        opened.set_trace_callback(self._observer)
        self._connection = opened
        return opened

    def _over(self, connection: sqlite3.Connection) -> Engine:
        if self._engine is None:
            self._engine = create_sync_engine(
                "sqlite://", creator=lambda: connection, poolclass=StaticPool
            )
        return self._engine

    def close(self) -> None:
        """Close the loop's connection (a later read opens it again)."""
        connection, self._connection = self._connection, None
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()
        if connection is not None:
            connection.close()


def _plain(plan: Plan) -> bool:
    """No value nor column needs a conversion, and sqlite3 can run the SQL: sqlite3 alone."""
    return (
        plan.columns is not None
        and not plan.expanding
        and not plan.converts_values
        and not plan.converts_columns
    )


_SQLITE = sqlite.dialect(paramstyle="qmark")
_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
