"""Fixtures of the database-layer tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests import databases

from parley.db.database import Database


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """A Database on the migrated test database (SQLite or PostgreSQL), disposed after."""
    db = Database.from_url(database_url)
    try:
        yield db
    finally:
        await db.dispose()


@pytest.fixture
async def sqlite_database(sqlite_template: Path, tmp_path: Path) -> AsyncIterator[Database]:
    """A Database on a copy of the migrated SQLite template, whatever the test databases."""
    db = Database.from_url(databases.sqlite_copy(sqlite_template, tmp_path))
    try:
        yield db
    finally:
        await db.dispose()
