"""Revision 0024 (the official SDK's conversations, API.md section 17) on a database with
conversations, on SQLite and PostgreSQL (each computes durations in its own date
arithmetic): every stored item gets its own `item_…` ID, every ended conversation its
`duration_ms`; the downgrade drops them again, keeping the rows."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine
from tests.databases import ADMIN_TIMEOUTS, database_kinds, postgres_admin_url

from parley.db.engine import create_engine
from parley.db.migrate import alembic_config, upgrade
from parley.ids import looks_like_id

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
LATER = NOW + timedelta(seconds=62.5)
ROWS = [
    "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'o', :now)",
    "INSERT INTO conversations (org_id, id, status, created_at, started_at, ended_at)"
    " VALUES ('org_1', 'done', 'ended', :now, :now, :later)",
    "INSERT INTO conversations (org_id, id, status, created_at)"
    " VALUES ('org_1', 'new', 'pending', :now)",
    "INSERT INTO conversation_items (org_id, conversation_id, role, text, created_at)"
    " VALUES ('org_1', 'done', 'user', 'hello', :now)",
    "INSERT INTO conversation_items (org_id, conversation_id, role, text, created_at)"
    " VALUES ('org_1', 'done', 'assistant', 'hi', :now)",
]


async def admin_sql(statement: str) -> None:
    admin = postgres_admin_url()
    assert admin is not None
    engine = create_engine(admin, timeouts=ADMIN_TIMEOUTS)
    try:
        async with engine.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


@pytest.fixture(params=database_kinds())
async def empty_engine(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty database of its own: a SQLite file, or a new PostgreSQL one."""
    if request.param == "sqlite":
        engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
        yield engine
        await engine.dispose()
        return
    admin = postgres_admin_url()
    assert admin is not None
    name = f"parley_m24_{secrets.token_hex(6)}"
    await admin_sql(f'CREATE DATABASE "{name}"')
    engine = create_engine(make_url(admin).set(database=name).render_as_string(hide_password=False))
    try:
        yield engine
    finally:
        await engine.dispose()
        await admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_upgrade_to_0024_gives_items_ids_and_ended_conversations_durations(
    empty_engine: AsyncEngine,
) -> None:
    engine = empty_engine
    await upgrade(engine, "0019")
    async with engine.begin() as connection:
        for statement in ROWS:
            await connection.execute(text(statement), {"now": NOW, "later": LATER})
    await upgrade(engine, "0024")
    async with engine.connect() as connection:
        items = (
            await connection.execute(
                text("SELECT text, item_id FROM conversation_items ORDER BY id")
            )
        ).all()
        durations = (
            await connection.execute(text("SELECT id, duration_ms FROM conversations ORDER BY id"))
        ).all()
    assert [text_ for text_, _ in items] == ["hello", "hi"]
    assert all(looks_like_id(item_id, "item") for _, item_id in items)
    assert items[0][1] != items[1][1]
    assert [tuple(row) for row in durations] == [("done", 62_500), ("new", None)]

    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0019"))
    async with engine.connect() as connection:
        kept = (await connection.execute(text("SELECT text FROM conversation_items"))).all()
    assert sorted(row[0] for row in kept) == ["hello", "hi"]
