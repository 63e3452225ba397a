"""`/health`'s write check (issue #22 item 4) costs one write per burst of checks."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.database import Database
from parley.db.session import DirectConnection

pytestmark = pytest.mark.anyio


async def test_check_writable_concurrent_callers_share_one_write(database: Database) -> None:
    writes = 0

    async def write(session: AsyncSession) -> None:
        nonlocal writes
        writes += 1
        await session.execute(text("SELECT 1"))
        await asyncio.sleep(0.05)

    await asyncio.gather(*(database.check_writable("probe", write) for _ in range(20)))
    assert writes == 1
    await database.check_writable("probe", write)  # a later check writes again
    assert writes == 2


async def test_check_writable_failure_reaches_every_caller(database: Database) -> None:
    async def refuse(session: AsyncSession) -> None:
        await session.execute(text("SELECT * FROM no_such_table"))

    results = await asyncio.gather(
        *(database.check_writable("refused", refuse) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(result, Exception) for result in results), results


async def test_check_writable_on_sqlite_writes_directly(database: Database) -> None:
    """With `directly` given, SQLite's probe is one direct write (one thread hop);
    PostgreSQL's is the transaction."""
    ran: list[str] = []

    async def write(session: AsyncSession) -> None:
        ran.append("transaction")
        await session.execute(text("SELECT 1"))

    def directly(core: DirectConnection) -> None:
        ran.append("direct")
        core.execute(text("SELECT 1"))

    await asyncio.gather(
        *(database.check_writable("both", write, directly=directly) for _ in range(5))
    )
    assert ran == (["direct"] if database.dialect == "sqlite" else ["transaction"])
