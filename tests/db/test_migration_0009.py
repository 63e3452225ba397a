"""Revision 0009 (one answer per CallSid, API.md section 13) on a database with calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from parley.db.engine import create_engine
from parley.db.migrate import upgrade

pytestmark = pytest.mark.anyio

NOW = "2026-11-30 10:00:00.000000"
ROWS = [
    "INSERT INTO organizations (id, name, created_at) VALUES ('org_1', 'o', :now)",
    "INSERT INTO conversations (org_id, id, status, created_at, twilio_call_sid)"
    " VALUES ('org_1', 'conv_a', 'ended', :now, 'CA1')",
    # Two conversations of one CallSid: what replays made before this revision.
    "INSERT INTO conversations (org_id, id, status, created_at, twilio_call_sid)"
    " VALUES ('org_1', 'conv_b', 'ended', :now, 'CA2')",
    "INSERT INTO conversations (org_id, id, status, created_at, twilio_call_sid)"
    " VALUES ('org_1', 'conv_c', 'live', :now, 'CA2')",
    "INSERT INTO conversations (org_id, id, status, created_at)"
    " VALUES ('org_1', 'conv_d', 'ended', :now)",
    "INSERT INTO stream_tokens (token_hash, org_id, conversation_id, expires_at)"
    " VALUES ('h', 'org_1', 'conv_a', :now)",
]


async def test_upgrade_to_0009_claims_the_calls_answered_before(tmp_path: Path) -> None:
    """Each CallSid answered before becomes one answered call (replayed ones too, so their
    repeats are refused), conversations without a call are left out, tokens get no copy."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    try:
        await upgrade(engine, "0008")
        async with engine.begin() as connection:
            for statement in ROWS:
                await connection.execute(text(statement), {"now": NOW})
        await upgrade(engine)
        async with engine.connect() as connection:
            calls = (
                await connection.execute(
                    text("SELECT org_id, call_sid, conversation_id FROM twilio_calls")
                )
            ).all()
            tokens = (
                await connection.execute(text("SELECT token_hash, token_sealed FROM stream_tokens"))
            ).all()
            conversations = (await connection.execute(text("SELECT id FROM conversations"))).all()
    finally:
        await engine.dispose()
    assert sorted(tuple(row) for row in calls) == [
        ("org_1", "CA1", "conv_a"),
        ("org_1", "CA2", "conv_b"),
    ]
    assert [tuple(row) for row in tokens] == [("h", None)]
    assert len(conversations) == 4
