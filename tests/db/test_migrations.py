"""The migrations build exactly the schema the tables describe."""

from __future__ import annotations

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
