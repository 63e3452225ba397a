"""Fixtures of the database-layer tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from parley.db.database import Database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """A Database on the migrated test database (SQLite or PostgreSQL), disposed after."""
    db = Database.from_url(database_url)
    try:
        yield db
    finally:
        await db.dispose()
