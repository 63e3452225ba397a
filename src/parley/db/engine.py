"""The async engine and session factory, with SQLite made safe for concurrent writers."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SQLITE_BUSY_TIMEOUT_MS = 10_000


def create_engine(url: str, *, echo: bool = False) -> AsyncEngine:
    """Create the engine for `url` (sqlite+aiosqlite or postgresql+asyncpg).

    SQLite gets WAL mode, foreign keys, a busy timeout and `BEGIN IMMEDIATE` transactions:
    every transaction takes the write lock up front, so two read-modify-write transactions
    can never interleave (the disable/update race is decided by the database, not by luck).
    """
    if url.startswith("sqlite"):
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": 30})
        _make_sqlite_serializable(engine)
        return engine
    return create_async_engine(url, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=10)


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Return the session factory: sessions keep loaded values after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _make_sqlite_serializable(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
