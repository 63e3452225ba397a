"""Run the Alembic migrations that ship inside the package.

`upgrade_if_needed` first compares the database's revision with the newest packaged one,
read from the migration files, and loads Alembic only when they differ: most runs of an
operator command find the schema current and start faster for it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from parley.db.errors import translated

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r"^revision\s*(?::[^=]*)?=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\s*(?::[^=]*)?=\s*[\"']([^\"']+)[\"']", re.MULTILINE)


def alembic_config(connection: Connection | None = None) -> Config:
    """Return an Alembic configuration pointing at the packaged migrations."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """Return the newest packaged revision: the one no other revision names as its parent."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (MIGRATIONS / "versions").glob("*.py"):
        source = script.read_text(encoding="utf-8")
        revisions.update(_REVISION.findall(source))
        parents.update(_DOWN_REVISION.findall(source))
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"the packaged migrations have {len(heads)} heads, expected one")
    return heads.pop()


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database to `revision` (default: the newest)."""
    from alembic import command

    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    with translated():
        async with engine.begin() as connection:
            await connection.run_sync(run)


async def upgrade_if_needed(engine: AsyncEngine) -> bool:
    """Migrate the database to the newest schema unless it is there; tell if it migrated."""
    if await stored_revision(engine) == head_revision():
        return False
    await upgrade(engine)
    return True


async def stored_revision(engine: AsyncEngine) -> str | None:
    """Return the revision in `alembic_version` without Alembic, or None if there is none."""
    with translated():
        async with engine.connect() as connection:
            tables = await connection.run_sync(
                lambda sync: sync.dialect.has_table(sync, "alembic_version")
            )
            if not tables:
                return None
            rows = (await connection.execute(text("SELECT version_num FROM alembic_version"))).all()
    return str(rows[0][0]) if len(rows) == 1 else None


async def current_revision(engine: AsyncEngine) -> str | None:
    """Return the revision the database is at, or None before the first migration."""
    from alembic.runtime.migration import MigrationContext

    def read(connection: Connection) -> str | None:
        return MigrationContext.configure(connection).get_current_revision()

    with translated():
        async with engine.connect() as connection:
            return await connection.run_sync(read)
