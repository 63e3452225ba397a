"""On SQLite the writers of one process take turns before `BEGIN IMMEDIATE`, so they never
sleep in SQLite's busy handler; the wait is bounded. PostgreSQL writers run concurrently."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession
from tests import databases
from tests.db.writer import writer_turn_held

from parley.db import database as database_module
from parley.db.database import Database
from parley.db.repos import instances as instance_repo
from parley.db.session import DirectConnection
from parley.db.tables import InstanceRow
from parley.errors import Conflict, Unavailable

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


async def test_sqlite_direct_write_takes_the_writer_turn(sqlite_database: Database) -> None:
    """`write_directly` (one thread hop a transaction) waits for this process's other
    writers like any transaction, and commits."""
    database = sqlite_database
    order: list[str] = []

    def write(connection: sqlite3.Connection) -> int:
        order.append("direct")
        connection.execute("INSERT INTO jti_claims (key, expires_at) VALUES ('turn', 1)")
        return 7

    async with writer_turn_held(database, order):
        direct = asyncio.ensure_future(database.write_directly(write))
        await asyncio.sleep(0.05)
        assert order == ["transaction"]

    assert await direct == 7
    assert order == ["transaction", "direct"]
    async with database.statement() as connection:
        kept = await connection.execute(text("SELECT count(*) FROM jti_claims WHERE key='turn'"))
        assert kept.scalar_one() == 1


async def test_sqlite_direct_write_rolls_back_on_error(sqlite_database: Database) -> None:
    database = sqlite_database

    def fail_halfway(connection: sqlite3.Connection) -> None:
        connection.execute("INSERT INTO jti_claims (key, expires_at) VALUES ('half', 1)")
        raise RuntimeError("halfway")

    with pytest.raises(RuntimeError):
        await database.write_directly(fail_halfway)

    async with database.statement() as connection:
        kept = await connection.execute(text("SELECT count(*) FROM jti_claims WHERE key='half'"))
        assert kept.scalar_one() == 0
    assert await database.write_directly(lambda c: c.execute("SELECT 1").fetchone()) == (1,)


async def test_sqlite_direct_write_locked_database_is_503(sqlite_database: Database) -> None:
    """Another process holding the write lock past the busy timeout: 503, not a 500."""
    database = sqlite_database
    await database.write_directly(lambda c: c.execute("PRAGMA busy_timeout=100"))
    other = sqlite3.connect(database.engine.url.database or "", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:

        def never(connection: sqlite3.Connection) -> None:
            raise AssertionError("ran while another process held the lock")

        with pytest.raises(Unavailable):
            await database.write_directly(never)
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_sqlite_direct_write_uses_the_engines_file_uri_included(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """The direct connection opens what the engine opens, a `file:` URI with its options
    too: its write is read back through the engine."""
    url = databases.sqlite_copy(sqlite_template, tmp_path)
    path = url.removeprefix("sqlite+aiosqlite:///")
    db = Database.from_url(f"sqlite+aiosqlite:///file:{path}?mode=rw&uri=true")
    try:
        await db.write_directly(
            lambda c: c.execute("INSERT INTO jti_claims (key, expires_at) VALUES ('uri', 1)")
        )
        async with db.statement() as connection:
            kept = await connection.execute(text("SELECT key FROM jti_claims"))
            assert kept.scalars().all() == ["uri"]
    finally:
        await db.dispose()


async def test_sqlite_direct_write_failed_commit_leaves_no_transaction(
    sqlite_database: Database,
) -> None:
    """A COMMIT that fails (here a deferred foreign key) rolls back; the next direct write
    starts a transaction of its own instead of meeting the failed one."""
    database = sqlite_database

    def orphan_project(connection: sqlite3.Connection) -> None:
        connection.execute("PRAGMA defer_foreign_keys=ON")
        connection.execute(
            "INSERT INTO projects (id, org_id, name, created_at) "
            "VALUES ('proj_orphan', 'org_missing', 'orphan', '2026-01-01 00:00:00')"
        )

    with pytest.raises(Exception, match="FOREIGN KEY"):
        await database.write_directly(orphan_project)

    assert await database.write_directly(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
    async with database.statement() as connection:
        kept = await connection.execute(text("SELECT count(*) FROM projects WHERE name='orphan'"))
        assert kept.scalar_one() == 0


async def test_sqlite_core_direct_write_stores_what_the_engine_stores(
    sqlite_database: Database,
) -> None:
    """`write_core_directly` runs a repository's Core statement unchanged: the timestamp it
    stores is the text the async engine stores, and reads back as the same aware time."""
    database = sqlite_database
    at = datetime(2026, 11, 28, 6, 30, 1, 123456, tzinfo=UTC)
    async with database.transaction() as session:
        await instance_repo.register(session, "inst_engine", at=at)
        await instance_repo.register(session, "inst_direct", at=at - timedelta(days=1))

    renewed = await database.write_core_directly(
        lambda core: instance_repo.beat_directly(core, "inst_direct", at=at)
    )
    missing = await database.write_core_directly(
        lambda core: instance_repo.beat_directly(core, "inst_gone", at=at)
    )

    assert (renewed, missing) == (True, False)
    async with database.statement() as connection:
        rows = await connection.execute(text("SELECT id, heartbeat_at FROM instances ORDER BY id"))
        stored = {row[0]: row[1] for row in rows}
    assert stored["inst_direct"] == stored["inst_engine"] == "2026-11-28 06:30:01.123456"
    async with database.read() as session:
        assert await _heartbeat_of(session, "inst_direct") == at


async def test_sqlite_core_direct_write_rolls_back_on_error_and_takes_the_turn(
    sqlite_database: Database,
) -> None:
    database = sqlite_database
    at = datetime(2026, 11, 28, tzinfo=UTC)
    async with database.transaction() as session:
        await instance_repo.register(session, "inst_kept", at=at)
    order: list[str] = []

    def fail_halfway(core: DirectConnection) -> None:
        order.append("direct")
        instance_repo.beat_directly(core, "inst_kept", at=at + timedelta(hours=1))
        raise RuntimeError("halfway")

    async with writer_turn_held(database, order):
        direct = asyncio.ensure_future(database.write_core_directly(fail_halfway))
        await asyncio.sleep(0.05)
        assert order == ["transaction"]
    with pytest.raises(RuntimeError):
        await direct

    assert order == ["transaction", "direct"]
    async with database.read() as session:
        assert await _heartbeat_of(session, "inst_kept") == at
    # The direct connection left no transaction open: the raw path still writes.
    assert await database.write_directly(lambda c: c.execute("SELECT 1").fetchone()) == (1,)


async def _heartbeat_of(session: AsyncSession, instance_id: str) -> datetime | None:
    return await session.scalar(
        select(InstanceRow.heartbeat_at).where(InstanceRow.id == instance_id)
    )


async def test_sqlite_core_direct_write_failed_commit_leaves_no_transaction(
    sqlite_database: Database,
) -> None:
    """As with `write_directly`: a COMMIT that fails rolls back, and the direct connection
    (shared by both paths) starts the next write afresh."""
    database = sqlite_database

    def orphan_project(core: DirectConnection) -> None:
        core.exec_driver_sql("PRAGMA defer_foreign_keys=ON")
        core.exec_driver_sql(
            "INSERT INTO projects (id, org_id, name, created_at) "
            "VALUES ('proj_orphan', 'org_missing', 'orphan', '2026-01-01 00:00:00')"
        )

    with pytest.raises(Conflict):  # SQLAlchemy's IntegrityError, translated
        await database.write_core_directly(orphan_project)

    assert await database.write_directly(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
    assert (
        await database.write_core_directly(lambda core: core.exec_driver_sql("SELECT 2").scalar())
        == 2
    )
    async with database.statement() as connection:
        kept = await connection.execute(text("SELECT count(*) FROM projects WHERE name='orphan'"))
        assert kept.scalar_one() == 0
