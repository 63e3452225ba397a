"""The async engine and session factory, with SQLite made safe for concurrent writers and
every wait on PostgreSQL bounded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from parley.db.errors import breaks_connection

SQLITE_BUSY_TIMEOUT_MS = 10_000
SQLITE_READ_POOL = 20
"""Pooled connections of the SQLite read engine (and as many more in overflow). With
SQLAlchemy's default of 5, 32 concurrent readers opened and closed about 150 connections a
second (a thread, the file, the pragmas and the schema each time): the JWT handshake and
the fresh-`jti` read spent their time there (docs/performance.md). A pooled reader costs an
idle thread and its page cache."""

SINGLE_STATEMENT = "parley_single_statement"
"""Execution option of a connection that runs one statement outside any transaction."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long the service waits on the database before answering 503 (seconds).

    `connect`: opening a connection; `statement`: one statement, client side (a hung
    server) and server side; `pool`: waiting for a free pooled connection.
    """

    connect: float = 3.0
    statement: float = 5.0
    pool: float = 3.0


POOL_SIZE = 20
"""PostgreSQL connections a process keeps open, by default (PARLEY_DATABASE_POOL_SIZE)."""


def create_engine(
    url: str,
    *,
    echo: bool = False,
    timeouts: Timeouts | None = None,
    read_only: bool = False,
    pool_size: int = POOL_SIZE,
) -> AsyncEngine:
    """Create the engine for `url` (sqlite+aiosqlite or postgresql+asyncpg).

    SQLite gets WAL mode, foreign keys, a busy timeout and `BEGIN IMMEDIATE` transactions:
    every transaction takes the write lock up front, so two read-modify-write transactions
    can never interleave (the disable/update race is decided by the database, not by luck).
    A `read_only` SQLite engine instead begins deferred transactions on `query_only`
    connections: in WAL mode they read a snapshot without waiting for, or blocking, the
    writer, and any write through them fails.

    PostgreSQL gets bounded connect, statement and pool-checkout times, and `pool_size`
    connections kept open, plus half as many more for bursts. Those extra ones are closed
    when they come back to a full pool, so a steady load above `pool_size` opens and closes
    a connection (a PostgreSQL backend, a TLS attempt) for nearly every checkout: a fleet
    disable at 32 connections spent a tenth of its CPU so with 10 (docs/performance.md).
    A pooled connection that the server closed is replaced at checkout without a round
    trip (asyncpg knows its socket closed). On both, a connection that failed in a way that
    breaks it (see `parley.db.errors.breaks_connection`) is discarded with every other
    pooled connection, so a restarted or repaired database serves the next request.
    """
    # hide_parameters: statement parameters hold secrets (a tool's endpoint headers, hashes
    # of credentials), so neither the SQL log nor a driver error's text may show them.
    bounds = timeouts or Timeouts()
    if url.startswith("sqlite"):
        pool = (
            {"pool_size": SQLITE_READ_POOL, "max_overflow": SQLITE_READ_POOL} if read_only else {}
        )
        engine = create_async_engine(
            url, echo=echo, hide_parameters=True, connect_args={"timeout": 30}, **pool
        )
        _configure_sqlite(engine, read_only=read_only)
    else:
        engine = create_async_engine(
            url,
            echo=echo,
            hide_parameters=True,
            pool_size=pool_size,
            max_overflow=max(1, pool_size // 2),
            pool_timeout=bounds.pool,
            connect_args=postgres_connect_args(bounds),
        )
        _replace_closed_connections(engine)
    _discard_broken_connections(engine)
    return engine


def postgres_connect_args(timeouts: Timeouts) -> dict[str, Any]:
    """asyncpg's connection arguments for PostgreSQL: a bounded connect, and every
    statement bounded on both sides (the client's `command_timeout`, the server's
    `statement_timeout`). The engine's connections and `db/driver.py`'s share them."""
    return {
        "timeout": timeouts.connect,
        "command_timeout": timeouts.statement,
        "server_settings": {"statement_timeout": str(int(timeouts.statement * 1000))},
    }


def single_statement_engine(engine: AsyncEngine) -> AsyncEngine:
    """Return `engine` (same pool) for connections that each run one statement outside any
    transaction: no `BEGIN` and no `COMMIT`, a round trip or two thread hops fewer.

    One statement is atomic and reads one consistent snapshot by itself (PostgreSQL's
    statement snapshot, SQLite's implicit transaction), so a read that is a single
    `SELECT` needs no transaction around it. PostgreSQL gets asyncpg's autocommit (set
    without a round trip); SQLite, whose driver already runs in autocommit, skips the
    `BEGIN` of the begin hook (setting SQLAlchemy's AUTOCOMMIT there costs a thread hop
    to aiosqlite's worker at checkout and another at return).
    """
    if engine.dialect.name == "sqlite":
        return engine.execution_options(**{SINGLE_STATEMENT: True})
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Return the session factory: sessions keep loaded values after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _discard_broken_connections(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        if breaks_connection(context.original_exception):
            # Invalidate this connection and, through `invalidate_pool_on_disconnect`,
            # every connection pooled before it: a restart breaks them all.
            context.is_disconnect = True


def _replace_closed_connections(engine: AsyncEngine) -> None:
    # Instead of `pool_pre_ping` (a round trip per checkout): asyncpg marks a connection
    # closed as soon as its socket closes, so a connection a restart broke is known at
    # checkout for free. DisconnectionError makes the pool open a fresh one.
    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        raw = getattr(dbapi_connection, "_connection", None)
        if raw is not None and raw.is_closed():
            raise DisconnectionError("the server closed this pooled connection")


def configure_sqlite_connection(connection: Any, *, read_only: bool) -> None:
    """WAL, foreign keys, the busy timeout and NORMAL sync (safe in WAL mode) on a DB-API
    connection; `read_only`: it refuses every write."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    if read_only:
        cursor.execute("PRAGMA query_only=ON")
    cursor.close()


def _configure_sqlite(engine: AsyncEngine, *, read_only: bool) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_connection.isolation_level = None
        configure_sqlite_connection(dbapi_connection, read_only=read_only)

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get(SINGLE_STATEMENT):
            return  # sqlite3 runs the statement in its own implicit transaction
        connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")
