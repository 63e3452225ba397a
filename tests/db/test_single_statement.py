"""`Database.statement()`: a read that is one `SELECT` runs outside any transaction (no
`BEGIN`/`COMMIT`, no ORM session) on both databases, and sees every committed change."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from parley.db.database import SQLITE_READ_THREADS, Database
from parley.db.tables import OrganizationRow

pytestmark = pytest.mark.anyio


async def _driver(connection: AsyncConnection) -> Any:
    return (await connection.get_raw_connection()).driver_connection


async def _in_transaction(connection: AsyncConnection) -> bool:
    """Ask the driver itself (aiosqlite or asyncpg) whether a transaction is open."""
    raw = await _driver(connection)
    if hasattr(raw, "is_in_transaction"):  # asyncpg
        return bool(raw.is_in_transaction())
    return bool(raw.in_transaction)  # aiosqlite, as sqlite3


async def test_single_statement_read_runs_outside_any_transaction(database: Database) -> None:
    if database.dialect == "sqlite":
        return await _sqlite_reads_run_outside_any_transaction(database)
    async with database.statement() as connection:
        assert isinstance(connection, AsyncConnection)
        assert (await connection.execute(text("SELECT 1"))).scalar() == 1
        assert not await _in_transaction(connection)
        used = await _driver(connection)
    # The same pooled connection, handed to a transaction next, is transactional again:
    # leaving autocommit is undone when the connection returns to the pool.
    async with database.read() as session:
        await session.execute(text("SELECT 1"))
        assert await _driver(await session.connection()) is used
        assert await _in_transaction(await session.connection())
    async with database.transaction() as session:  # one engine serves reads and changes
        await session.execute(text("SELECT 1"))
        assert await _driver(await session.connection()) is used
        assert await _in_transaction(await session.connection())


async def _sqlite_reads_run_outside_any_transaction(database: Database) -> None:
    """On SQLite a statement runs in a reading thread (`DirectReads`) and leaves no read
    transaction open: nothing pins the WAL, so a full checkpoint is never kept busy."""
    async with database.transaction() as session:
        session.add(OrganizationRow(id="org_wal", name="wal", created_at=datetime.now(UTC)))

    async def count() -> Any:
        async with database.statement() as connection:
            return (await connection.execute(text("SELECT count(*) FROM organizations"))).scalar()

    counts = await asyncio.gather(*(count() for _ in range(4 * SQLITE_READ_THREADS)))
    assert len(set(counts)) == 1
    path = database.engine.url.database
    assert path is not None
    checkpointer = sqlite3.connect(path, isolation_level=None)
    try:
        busy, _, _ = checkpointer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        checkpointer.close()
    assert busy == 0


async def test_single_statement_read_sees_committed_changes_at_once(database: Database) -> None:
    async def count() -> Any:
        async with database.statement() as connection:
            return (await connection.execute(text("SELECT count(*) FROM organizations"))).scalar()

    # Several reads at once, so that every reading thread (SQLite) has read before the change.
    before = set(await asyncio.gather(*(count() for _ in range(4 * SQLITE_READ_THREADS))))
    async with database.transaction() as session:
        session.add(OrganizationRow(id="org_single", name="single", created_at=datetime.now(UTC)))
    after = set(await asyncio.gather(*(count() for _ in range(4 * SQLITE_READ_THREADS))))
    assert len(before) == 1
    assert after == {before.pop() + 1}
