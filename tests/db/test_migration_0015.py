"""Revision 0015 (external storage policies, API.md section 16) on a database with agents:
the agents stay, naming no policy; its downgrade drops the table and the column again,
keeping the agents."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from parley.db.engine import create_engine
from parley.db.migrate import alembic_config, upgrade

pytestmark = pytest.mark.anyio

NOW = "2026-12-01 10:00:00.000000"
ROWS = [
    "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'o', :now)",
    "INSERT INTO projects (id, org_id, name, created_at) VALUES ('proj_1', 'org_1', 'main', :now)",
    "INSERT INTO agents (id, org_id, project_id, name, voice_id, system_prompt, language,"
    " audio_format, created_at, updated_at) VALUES ('agent_1', 'org_1', 'proj_1', 'a', 'v',"
    " 'p', 'en', 'pcm_16000', :now, :now)",
    "INSERT INTO phone_numbers (number, agent_id, position) VALUES ('+14155550100', 'agent_1', 0)",
]


def layout(connection: Connection) -> tuple[set[str], set[str]]:
    inspector = inspect(connection)
    return set(inspector.get_table_names()), {c["name"] for c in inspector.get_columns("agents")}


async def test_upgrade_to_0015_keeps_agents_naming_no_policy_and_downgrade_undoes_it(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0014")
        async with engine.begin() as connection:
            for statement in ROWS:
                await connection.execute(text(statement), {"now": NOW})
        await upgrade(engine, "0015")
        async with engine.connect() as connection:
            tables, columns = await connection.run_sync(layout)
            agents = (
                await connection.execute(text("SELECT id, external_storage_policy_id FROM agents"))
            ).all()
        assert "external_storage_policies" in tables
        assert [tuple(row) for row in agents] == [("agent_1", None)]

        async with engine.begin() as connection:
            await connection.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0014"))
        async with engine.connect() as connection:
            tables, columns = await connection.run_sync(layout)
            numbers = (await connection.execute(text("SELECT number FROM phone_numbers"))).all()
    finally:
        await engine.dispose()
    assert "external_storage_policies" not in tables
    assert "external_storage_policy_id" not in columns
    assert "name" in columns
    assert [tuple(row) for row in numbers] == [("+14155550100",)]  # no cascade fired
