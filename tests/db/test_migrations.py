"""The migrations build exactly the schema the tables describe."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from parley.db.engine import create_engine
from parley.db.migrate import current_revision
from parley.db.tables import Base

pytestmark = pytest.mark.anyio


async def test_migrations_match_tables(database_url: str) -> None:
    engine = create_engine(database_url)

    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))

    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(diff)
        assert differences == []
        assert await current_revision(engine) is not None
    finally:
        await engine.dispose()


def test_head_revision_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    from parley.db.migrate import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_upgrade_if_needed_migrates_an_empty_database_once(tmp_path: Path) -> None:
    from parley.db.migrate import head_revision, stored_revision, upgrade_if_needed

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}")
    try:
        assert await stored_revision(engine) is None
        assert await upgrade_if_needed(engine) is True
        assert await stored_revision(engine) == head_revision()
        assert await current_revision(engine) == head_revision()
        assert await upgrade_if_needed(engine) is False
    finally:
        await engine.dispose()


async def test_is_current_true_on_a_migrated_database(database_url: str) -> None:
    from parley.db.migrate import is_current

    assert await is_current(database_url) is True


async def test_is_current_false_when_behind_or_unknown(tmp_path: Path) -> None:
    from parley.db.migrate import head_revision, is_current

    fresh = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    behind = tmp_path / "behind.db"
    with sqlite3.connect(behind) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
        connection.execute("INSERT INTO alembic_version VALUES ('0001')")
    connection.close()
    closed_port = "postgresql+asyncpg://parley@127.0.0.1:1/parley"

    assert head_revision() != "0001"
    assert await is_current(fresh) is False  # no file: never created by asking
    assert not (tmp_path / "fresh.db").exists()
    assert await is_current(f"sqlite+aiosqlite:///{behind}") is False
    assert await is_current(closed_port) is False  # the engine's path reports the failure


async def test_upgrade_to_0005_keeps_data_and_finds_conversation_projects(
    tmp_path: Path,
) -> None:
    """From 0004 (conversations knew their project by name only) to 0005: rows survive,
    agents get empty tool/template/keyword fields, conversations get their project's ID."""
    from sqlalchemy import text

    from parley.db.migrate import upgrade

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    now = "2026-11-01 10:00:00.000000"
    rows = [
        "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'o', :now)",
        "INSERT INTO projects (id, org_id, name, created_at)"
        " VALUES ('proj_1', 'org_1', 'main', :now)",
        "INSERT INTO agents (id, org_id, project_id, name, voice_id, system_prompt, language,"
        " audio_format, created_at, updated_at) VALUES ('agent_1', 'org_1', 'proj_1', 'a',"
        " 'v', 'p', 'en', 'pcm_16000', :now, :now)",
        "INSERT INTO conversations (org_id, id, agent_id, project_name, status, created_at)"
        " VALUES ('org_1', 'c1', 'agent_1', 'main', 'ended', :now)",
        "INSERT INTO conversations (org_id, id, agent_id, project_name, status, created_at)"
        " VALUES ('org_1', 'c2', NULL, 'gone', 'ended', :now)",
        "INSERT INTO phone_numbers (number, agent_id, position)"
        " VALUES ('+14155550100', 'agent_1', 0)",
        "INSERT INTO conversation_items (org_id, conversation_id, role, text, created_at)"
        " VALUES ('org_1', 'c1', 'user', 'hello', :now)",
    ]
    try:
        await upgrade(engine, "0004")
        async with engine.begin() as connection:
            for statement in rows:
                await connection.execute(text(statement), {"now": now})
        await upgrade(engine)
        async with engine.connect() as connection:
            agent = (
                await connection.execute(
                    text("SELECT name, tools, template_variables, boosted_keywords FROM agents")
                )
            ).one()
            found = (
                await connection.execute(
                    text(
                        "SELECT id, agent_id, project_id, project_name, template_variables"
                        " FROM conversations ORDER BY id"
                    )
                )
            ).all()
            item = (
                await connection.execute(text("SELECT text, tool_calls FROM conversation_items"))
            ).one()
            numbers = (await connection.execute(text("SELECT number FROM phone_numbers"))).all()
    finally:
        await engine.dispose()
    assert tuple(agent) == ("a", "[]", "{}", "[]")
    assert [tuple(row) for row in found] == [
        ("c1", "agent_1", "proj_1", "main", "{}"),
        ("c2", None, None, "gone", "{}"),
    ]
    assert tuple(item) == ("hello", "[]")
    assert [tuple(row) for row in numbers] == [("+14155550100",)]
