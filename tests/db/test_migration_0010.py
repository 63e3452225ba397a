"""Revision 0010 (silence settings, API.md section 15) on a database with conversations:
`ended_by` is widened in place, its values and the conversations' items kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from parley.db.engine import create_engine
from parley.db.migrate import upgrade

pytestmark = pytest.mark.anyio

NOW = "2026-12-01 10:00:00.000000"
ROWS = [
    "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'o', :now)",
    "INSERT INTO conversations (org_id, id, status, created_at, ended_by)"
    " VALUES ('org_1', 'conv_a', 'ended', :now, 'user')",
    "INSERT INTO conversation_items (org_id, conversation_id, role, text, created_at)"
    " VALUES ('org_1', 'conv_a', 'user', 'hello', :now)",
]


async def test_upgrade_to_0010_widens_ended_by_keeping_conversations_and_items(
    tmp_path: Path,
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0009")
        async with engine.begin() as connection:
            for statement in ROWS:
                await connection.execute(text(statement), {"now": NOW})
        await upgrade(engine)
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO conversations (org_id, id, status, created_at, ended_by)"
                    " VALUES ('org_1', 'conv_b', 'ended', :now,"
                    " 'assistant_silence_limit_reached')"
                ),
                {"now": NOW},
            )
            ended = (
                await connection.execute(text("SELECT id, ended_by FROM conversations ORDER BY id"))
            ).all()
            items = (await connection.execute(text("SELECT text FROM conversation_items"))).all()
            poke = (await connection.execute(text("SELECT no_input_poke_text FROM agents"))).all()
    finally:
        await engine.dispose()
    assert [tuple(row) for row in ended] == [
        ("conv_a", "user"),
        ("conv_b", "assistant_silence_limit_reached"),
    ]
    assert [tuple(row) for row in items] == [("hello",)]
    assert poke == []
