"""The database handle services use: one transaction per unit of work."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, Executable, Result, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from parley import metrics
from parley.db.direct import (
    DirectReads,
    InlineReads,
    Unit,
    core_engine_over,
    in_core_transaction,
    run_units,
)
from parley.db.driver import DriverStatements
from parley.db.engine import (
    POOL_SIZE,
    SQLITE_BUSY_TIMEOUT_MS,
    Timeouts,
    configure_sqlite_connection,
    create_engine,
    create_sessionmaker,
    single_statement_engine,
)
from parley.db.errors import RETRY_AFTER_SECONDS, UniqueViolations, translated
from parley.db.session import StatementConnection, StatementWriter
from parley.errors import Unavailable
from parley.shared_probe import SharedProbe

T = TypeVar("T")

SQLITE_READ_THREADS = 2
"""Threads for SQLite's one-statement reads (`DirectReads`): a read holds one for a
statement only, and two cores keep no more than a few busy."""

_PING = text("SELECT 1")

_CHANGED_ORGS = "parley.changed_orgs"
_AFTER_COMMIT = "parley.after_commit"


def mark_changed(session: StatementWriter, org_id: str) -> None:
    """Note, in the transaction (or `autocommit()`), that it changes an organization's
    data: once it commits, the commit listeners hear of it (`Database.add_commit_listener`)."""
    session.info.setdefault(_CHANGED_ORGS, set()).add(org_id)


def after_commit(session: AsyncSession, callback: Callable[[], None]) -> None:
    """Call `callback` once the transaction of `session` (a `Database.transaction()`) has
    committed, never on a rollback. Kept in the session's `info`: SQLAlchemy's
    `after_commit` event costs a listener registration per transaction."""
    session.info.setdefault(_AFTER_COMMIT, []).append(callback)


class _AutocommitWriter:
    """A connection outside any transaction, with the notes of what its statements changed."""

    def __init__(self, connection: StatementConnection) -> None:
        self._connection = connection
        self.info: dict[Any, Any] = {}

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None, /
    ) -> Result[Any]:
        return await self._connection.execute(statement, parameters)


class Database:
    """Owns the engines; hands out transactions whose failures are Parley errors.

    `transaction()` is for changes (on SQLite it takes the write lock up front);
    `read()` is for reads only (on SQLite a snapshot that neither waits for the writer nor
    blocks it); `statement()` is for a read that is one `SELECT` (no transaction, no ORM
    session). PostgreSQL serves all three from one engine.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        timeouts: Timeouts | None = None,
        *,
        read_engine: AsyncEngine | None = None,
    ) -> None:
        self.engine = engine
        self.read_engine = read_engine or engine
        self.timeouts = timeouts or Timeouts()
        self._sessions: async_sessionmaker[AsyncSession] = create_sessionmaker(engine)
        self._read_sessions = (
            create_sessionmaker(read_engine) if read_engine is not None else self._sessions
        )
        self._statements = single_statement_engine(self.read_engine)
        self.direct_reads = (
            DirectReads(functools.partial(_open_reader, self.read_engine), SQLITE_READ_THREADS)
            if read_engine is not None and read_engine.dialect.name == "sqlite"
            else None
        )
        self.inline_reads = (
            InlineReads(functools.partial(_open_inline, self.read_engine), self.direct_reads)
            if self.direct_reads is not None
            else None
        )
        self.driver = (
            DriverStatements(self.engine, self._statements, self.timeouts)
            if engine.dialect.name == "postgresql"
            else None
        )
        self._probe = SharedProbe(self.ping)
        self._write_probes: dict[str, SharedProbe] = {}
        self._writers = asyncio.Lock() if engine.dialect.name == "sqlite" else None
        self._commit_listeners: list[Callable[[frozenset[str]], None]] = []
        self._direct: tuple[ThreadPoolExecutor, sqlite3.Connection] | None = None
        self._direct_core: Engine | None = None  # over the direct connection, made once
        self._units: list[Unit[Any]] = []  # waiting for the next batch of `transact`
        self._unit_batches: asyncio.Task[None] | None = None

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        connect_timeout: float | None = None,
        statement_timeout: float | None = None,
        pool_timeout: float | None = None,
        pool_size: int | None = None,
    ) -> Database:
        """Open (lazily) the database at `url`; waits on it are bounded (seconds); a
        PostgreSQL pool keeps `pool_size` connections (None: `engine.POOL_SIZE`)."""
        defaults = Timeouts()
        timeouts = Timeouts(
            connect=connect_timeout or defaults.connect,
            statement=statement_timeout or defaults.statement,
            pool=pool_timeout or defaults.pool,
        )
        read_engine = None
        if url.startswith("sqlite"):
            read_engine = create_engine(url, timeouts=timeouts, read_only=True)
        engine = create_engine(url, timeouts=timeouts, pool_size=pool_size or POOL_SIZE)
        return cls(engine, timeouts, read_engine=read_engine)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(
        self, unique_violations: UniqueViolations | None = None
    ) -> AsyncIterator[AsyncSession]:
        """Yield a session inside one transaction: committed on success, else rolled back.

        After a commit that changed organizations' data (`mark_changed`), the commit
        listeners are told which, before this returns (services/read_model.py).
        """
        async with self._write_turn():
            async with self._within(self._sessions, unique_violations) as session:
                yield session
            self._committed(session.info)

    async def transact(
        self,
        work: Callable[[AsyncSession], Awaitable[T]],
        unique_violations: UniqueViolations | None = None,
    ) -> T:
        """Run `work(session)` as one transaction, as `transaction()` would, and return what
        it returns.

        On SQLite the units that arrive together run as one batch in one thread hop on the
        direct connection (db/direct.py): one transaction, each unit in a savepoint of its
        own (a unit that fails rolls back alone), in arrival order, each one's commit
        listeners and callbacks told after the commit. A unit's session is an
        `AsyncSession` over the direct connection's synchronous engine, so each of its
        awaits is a statement that completes at once and the unit runs to its end without
        an event loop: it must await nothing but its session (anything else is refused with
        a RuntimeError and rolled back). A caller cancelled before its batch starts leaves
        its unit unrun. PostgreSQL runs `work` in `transaction()`.
        """
        if self.dialect != "sqlite":
            async with self.transaction(unique_violations) as session:
                return await work(session)
        unit: Unit[T] = Unit(work, unique_violations, asyncio.get_running_loop().create_future())
        self._units.append(unit)
        if self._unit_batches is None or self._unit_batches.done():
            self._unit_batches = asyncio.ensure_future(self._run_unit_batches())
        return await unit.answer

    async def _run_unit_batches(self) -> None:
        """Run the waiting units, a batch at a time, until none waits. A batch is taken
        once the writer's turn is this runner's: every unit that arrived meanwhile."""
        while self._units:
            batch: list[Unit[Any]] = []
            try:
                async with self._write_turn():
                    batch = self._waiting_units()
                    if batch:
                        await self._in_core_transaction(functools.partial(run_units, units=batch))
            except BaseException as error:  # no turn, or the batch's transaction failed
                for unit in batch or self._waiting_units():
                    _settle(unit, error)
                if not isinstance(error, Exception):
                    raise
                continue
            for unit in batch:
                if unit.error is not None:
                    if type(unit.error) is Unavailable:
                        metrics.count_store_error("database")
                    _settle(unit, unit.error)
                    continue
                try:
                    self._committed(unit.info)
                except Exception as error:
                    _settle(unit, error)
                    continue
                if not unit.answer.done():
                    unit.answer.set_result(unit.result)

    def _waiting_units(self) -> list[Unit[Any]]:
        """Take the waiting units, leaving out those whose callers were cancelled."""
        waiting = [unit for unit in self._units if not unit.answer.done()]
        self._units.clear()
        return waiting

    def _committed(self, info: Mapping[Any, Any]) -> None:
        """Tell the commit listeners and the after-commit callbacks of a transaction."""
        changed: set[str] | None = info.get(_CHANGED_ORGS)
        if changed:
            for listener in self._commit_listeners:
                listener(frozenset(changed))
        for callback in info.get(_AFTER_COMMIT, ()):
            callback()

    def add_commit_listener(self, listener: Callable[[frozenset[str]], None]) -> None:
        """Call `listener` with the organizations whose data each committed transaction
        changed (called in the committing task; it must not block)."""
        self._commit_listeners.append(listener)

    @asynccontextmanager
    async def _write_turn(self) -> AsyncIterator[None]:
        """On SQLite, wait for this process's previous writer before `BEGIN IMMEDIATE`.

        SQLite has one writer; without a turn, concurrent transactions of this process all
        try its lock and sleep in its busy handler (up to 100 ms a try), so a burst of
        writes ran in seconds at the tail. In turn they start the moment the lock is free.
        Other processes still meet the busy handler; the wait is bounded by its timeout.
        """
        if self._writers is None:
            yield
            return
        try:
            async with asyncio.timeout(SQLITE_BUSY_TIMEOUT_MS / 1000):
                await self._writers.acquire()
        except TimeoutError:
            metrics.count_store_error("database")
            raise Unavailable(retry_after=RETRY_AFTER_SECONDS) from None
        try:
            yield
        finally:
            self._writers.release()

    async def write_directly(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """SQLite only: run `work` as one transaction on a connection of its own, in a
        thread of its own, in this process's writer turn; return what it returns.

        One thread hop for the whole transaction instead of one per statement (`BEGIN`,
        each statement, `COMMIT`): under load each hop waits for a turn of the busy event
        loop, so a `jti` claim's group commit took about 35 ms, most of a WebSocket
        handshake (docs/performance.md). For small, hot, self-contained writes that notify
        no one (no `mark_changed`, no `after_commit`).
        """
        async with self._write_turn():
            with _counted():
                executor, connection = await self._direct_connection()
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(executor, _in_transaction, connection, work)

    async def write_core_directly(
        self,
        work: Callable[[Connection], T],
        unique_violations: UniqueViolations | None = None,
    ) -> T:
        """SQLite only: `write_directly` for SQLAlchemy Core. `work` gets a synchronous
        connection over the direct connection, inside one transaction (`BEGIN IMMEDIATE`,
        committed, rolled back on error), so the statements the repositories build for the
        async engines run unchanged: same dialect, same column types."""
        async with self._write_turn():
            return await self._in_core_transaction(work, unique_violations)

    async def _in_core_transaction(
        self, work: Callable[[Connection], T], unique_violations: UniqueViolations | None = None
    ) -> T:
        """`write_core_directly`'s transaction, for a caller holding the writer turn."""
        with _counted(unique_violations):
            executor, connection = await self._direct_connection()
            if self._direct_core is None:
                self._direct_core = core_engine_over(connection)
            engine = self._direct_core
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(executor, in_core_transaction, engine, work)

    async def _direct_connection(self) -> tuple[ThreadPoolExecutor, sqlite3.Connection]:
        if self._direct is None:
            if self.dialect != "sqlite":
                raise TypeError("write_directly is for SQLite only")
            executor = ThreadPoolExecutor(1, thread_name_prefix="parley-sqlite-direct")
            # The engine's own reading of its URL: the same file, `uri=` and `mode=` included.
            args, kwargs = self.engine.dialect.create_connect_args(self.engine.url)
            connection = await asyncio.get_running_loop().run_in_executor(
                executor, _open_direct, args, kwargs
            )
            self._direct = (executor, connection)  # opened in the writer turn: only once
        return self._direct

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """Yield a session for reads only: a consistent snapshot, no lock (SQLite)."""
        async with self._within(self._read_sessions, None) as session:
            yield session

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[StatementConnection]:
        """Yield a connection for one Core `SELECT` outside any transaction.

        A single statement reads one consistent snapshot by itself, so the hot reads that
        are one statement (a credential by its hash, a conversation with its items) skip
        `BEGIN`/`COMMIT` and the ORM session: measured in-process, about half the CPU of
        `read()` per read on both databases (docs/performance.md). On SQLite each statement
        is one thread hop to a reading thread (`DirectReads`). Never for two statements
        that must agree: use `read()`.
        """
        with _counted():
            if self.direct_reads is not None:
                yield self.direct_reads
                return
            async with self._statements.connect() as connection:
                yield connection

    @asynccontextmanager
    async def point_read(self) -> AsyncIterator[StatementConnection]:
        """Yield a connection for one Core `SELECT` that an index answers with a bounded
        number of rows (a row by its key, a conversation with its items): `statement()`,
        but on SQLite it runs in the event loop's own thread, with no thread hop
        (`InlineReads`): the hop cost more than such a read. For the hot look-ups, with
        statements built once; a read that may scan or return many rows uses `statement()`.
        On PostgreSQL it runs on asyncpg directly, without the engine's checkout and
        execution (`DriverStatements`).
        """
        fast = self.inline_reads or self.driver
        if fast is None:
            async with self.statement() as connection:
                yield connection
            return
        with _counted():
            yield fast

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[StatementWriter]:
        """Yield a connection whose statements each commit on their own (PostgreSQL only).

        For a change that is one statement and must hold its locks for no longer than that
        statement: in a transaction they are held across the round trip to `COMMIT`,
        which waits for this process's busy event loop (docs/performance.md). What the
        statements note (`mark_changed`) reaches the commit listeners when the block ends
        without an error. SQLite has no use for it: its one writer at a time already
        runs a transaction in one thread hop (`transact`).
        """
        if self.driver is None:
            raise RuntimeError("autocommit() is for PostgreSQL; SQLite writes use transact()")
        with _counted():
            writer = _AutocommitWriter(self.driver)  # asyncpg directly: `DriverStatements`
            yield writer
        self._committed(writer.info)

    @asynccontextmanager
    async def _within(
        self,
        sessions: async_sessionmaker[AsyncSession],
        unique_violations: UniqueViolations | None,
    ) -> AsyncIterator[AsyncSession]:
        with _counted(unique_violations):
            async with sessions() as session, session.begin():
                yield session

    async def check_health(self) -> None:
        """Raise Unavailable unless the database answers a ping.

        Callers that ask while a ping runs share its answer; an earlier success is never
        trusted (`SharedProbe`).
        """
        await self._probe()

    async def check_writable(
        self,
        name: str,
        write: Callable[[AsyncSession], Awaitable[None]],
        *,
        directly: Callable[[Connection], object] | None = None,
    ) -> None:
        """Raise Unavailable unless `write` commits (a full disk refuses writes).

        Callers that ask while a write probe of the same `name` runs share its answer, so a
        burst of health checks costs one write, not one each (they would queue behind
        SQLite's single writer and behind the requests). On SQLite, `directly` (the same
        write on a synchronous connection) runs instead when given: one thread hop
        (`write_core_directly`), about a third of `/health`'s cost otherwise."""
        probe = self._write_probes.get(name)
        if probe is None:

            async def run() -> None:
                if directly is not None and self.dialect == "sqlite":
                    await self.write_core_directly(directly)
                    return
                async with self.transaction() as session:
                    await write(session)

            probe = self._write_probes[name] = SharedProbe(run)
        await probe()

    async def ping(self) -> None:
        """Run a trivial query; raise Unavailable unless the database answers in time.

        The deadline covers a pool checkout, a connection and one statement, so a hung
        database is reported within about `pool + connect + statement` seconds.
        """
        bound = self.timeouts.pool + self.timeouts.connect + self.timeouts.statement
        try:
            # One statement, no ORM session and no transaction (`statement()`).
            async with asyncio.timeout(bound), self.statement() as connection:
                await connection.execute(_PING)
        except TimeoutError:
            raise Unavailable(retry_after=RETRY_AFTER_SECONDS) from None

    async def dispose(self) -> None:
        """Close every pooled connection (and the direct one)."""
        if self._direct is not None:
            executor, connection = self._direct
            self._direct = None
            self._direct_core = None  # never disposed: its one connection is closed here
            await asyncio.get_running_loop().run_in_executor(executor, connection.close)
            executor.shutdown(wait=False)
        if self.inline_reads is not None:
            self.inline_reads.close()
        if self.driver is not None:
            await self.driver.close()
        if self.direct_reads is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.direct_reads.close)
        await self.engine.dispose()
        if self.read_engine is not self.engine:
            await self.read_engine.dispose()


def _open_direct(args: Sequence[Any], kwargs: Mapping[str, Any]) -> sqlite3.Connection:
    return _open_sqlite(args, kwargs, read_only=False)


def _open_reader(engine: AsyncEngine) -> sqlite3.Connection:
    """A read-only connection to the file of `engine`, for one reading thread (closed,
    once idle, from another: `DirectReads.close`)."""
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    return _open_sqlite(args, kwargs, read_only=True)


def _open_inline(engine: AsyncEngine) -> sqlite3.Connection:
    """A read-only connection to the file of `engine` for the event loop's own thread: it
    never waits for a lock (SQLite answers busy at once: `InlineReads` hops instead)."""
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    return _open_sqlite(args, kwargs, read_only=True, waits=False)


def _open_sqlite(
    args: Sequence[Any], kwargs: Mapping[str, Any], *, read_only: bool, waits: bool = True
) -> sqlite3.Connection:
    options = {**kwargs, "timeout": 30, "isolation_level": None, "check_same_thread": not read_only}
    connection: sqlite3.Connection = sqlite3.connect(*args, **options)
    configure_sqlite_connection(connection, read_only=read_only)
    if not waits:
        connection.execute("PRAGMA busy_timeout=0")  # after the pragmas, which may wait
    return connection


def _settle(unit: Unit[Any], error: BaseException) -> None:
    if unit.answer.done():
        return
    if isinstance(error, Exception):
        unit.answer.set_exception(error)
    else:
        unit.answer.cancel()


def _in_transaction(connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (a deferred constraint, a full disk) can leave the transaction
        # open: the connection must not keep it for the next write.
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return result


@contextmanager
def _counted(unique_violations: UniqueViolations | None = None) -> Iterator[None]:
    """`translated()`, counting each database failure in the store-error metric."""
    try:
        with translated(unique_violations):
            yield
    except Unavailable as error:
        if type(error) is Unavailable:  # what translated() makes of a database failure
            metrics.count_store_error("database")
        raise
