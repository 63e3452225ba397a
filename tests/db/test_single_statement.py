"""`Database.statement()`: a read that is one `SELECT` runs outside any transaction (no
`BEGIN`/`COMMIT`, no ORM session) on both databases, and sees every committed change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from parley.db.database import Database
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
    async with database.statement() as connection:
        assert (await connection.execute(text("SELECT 1"))).scalar() == 1
        assert not await _in_transaction(connection)
        used = await _driver(connection)
    # The same pooled connection, handed to a transaction next, is transactional again:
    # leaving autocommit is undone when the connection returns to the pool.
    async with database.read() as session:
        await session.execute(text("SELECT 1"))
        assert await _driver(await session.connection()) is used
        assert await _in_transaction(await session.connection())
    if database.dialect == "postgresql":  # one engine serves reads and changes
        async with database.transaction() as session:
            await session.execute(text("SELECT 1"))
            assert await _driver(await session.connection()) is used
            assert await _in_transaction(await session.connection())


async def test_single_statement_read_sees_committed_changes_at_once(database: Database) -> None:
    async with database.statement() as connection:
        before = (await connection.execute(text("SELECT count(*) FROM organizations"))).scalar()
    async with database.transaction() as session:
        session.add(OrganizationRow(id="org_single", name="single", created_at=datetime.now(UTC)))
    async with database.statement() as connection:
        after = (await connection.execute(text("SELECT count(*) FROM organizations"))).scalar()
    assert after == before + 1
