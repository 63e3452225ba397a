"""On SQLite the writers of one process take turns before `BEGIN IMMEDIATE`, so they never
sleep in SQLite's busy handler; the wait is bounded. PostgreSQL writers run concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests import databases

from parley.db import database as database_module
from parley.db.database import Database
from parley.errors import Unavailable

pytestmark = pytest.mark.anyio


async def test_sqlite_writers_take_turns(database: Database) -> None:
    inside = 0
    most = 0

    async def write() -> None:
        nonlocal inside, most
        async with database.transaction():
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.01)
            inside -= 1

    await asyncio.gather(*(write() for _ in range(8)))
    if database.dialect == "sqlite":
        assert most == 1
    else:
        assert most > 1  # PostgreSQL locks rows, not the database: no turn to wait for


@pytest.fixture
async def sqlite_database(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[Database]:
    db = Database.from_url(databases.sqlite_copy(sqlite_template, tmp_path))
    try:
        yield db
    finally:
        await db.dispose()


async def test_sqlite_write_turn_wait_bounded_then_503(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = sqlite_database
    monkeypatch.setattr(database_module, "SQLITE_BUSY_TIMEOUT_MS", 200)
    held = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with database.transaction():
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await held.wait()
    try:
        with pytest.raises(Unavailable):
            async with database.transaction():
                pass
    finally:
        release.set()
        await holder
    async with database.transaction():  # the turn is free again
        pass
