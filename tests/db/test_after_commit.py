"""`after_commit`: a callback runs once the transaction committed, never on a rollback (the
webhook hand-over rings only for deliveries that exist)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from parley.db.database import Database, after_commit

pytestmark = pytest.mark.anyio


async def test_after_commit_runs_once_after_the_commit(database: Database) -> None:
    calls: list[str] = []
    async with database.transaction() as session:
        await session.execute(text("SELECT 1"))
        after_commit(session, lambda: calls.append("first"))
        after_commit(session, lambda: calls.append("second"))
        assert calls == []  # not before the commit
    assert calls == ["first", "second"]
    async with database.transaction():
        pass
    assert calls == ["first", "second"]  # not again in the next transaction


async def test_after_commit_never_runs_on_a_rollback(database: Database) -> None:
    calls: list[str] = []

    async def failing_change() -> None:
        async with database.transaction() as session:
            after_commit(session, lambda: calls.append("rolled back"))
            raise RuntimeError("the change fails")

    with pytest.raises(RuntimeError):
        await failing_change()
    assert calls == []
