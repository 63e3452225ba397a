"""Run the Alembic migrations that ship inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from parley.db.errors import translated

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """Return an Alembic configuration pointing at the packaged migrations."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database to `revision` (default: the newest)."""

    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    with translated():
        async with engine.begin() as connection:
            await connection.run_sync(run)


async def current_revision(engine: AsyncEngine) -> str | None:
    """Return the revision the database is at, or None before the first migration."""

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    with translated():
        async with engine.connect() as connection:
            return await connection.run_sync(read)
