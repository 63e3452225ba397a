"""Run the Alembic migrations that ship inside the package.

`upgrade_if_needed` first compares the database's revision with the newest packaged one,
read from the migration files, and loads Alembic only when they differ: most runs of an
operator command find the schema current and start faster for it. `is_current` asks the
database driver directly, so `parley migrate` on a current schema loads neither Alembic nor
SQLAlchemy's async engine and ORM.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from parley.db.errors import translated
from parley.errors import Unavailable

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncEngine

DIRECT_TIMEOUT_SECONDS = 3.0

MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r"^revision\s*(?::[^=]*)?=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(r"^down_revision\s*(?::[^=]*)?=\s*[\"']([^\"']+)[\"']", re.MULTILINE)

log = logging.getLogger(__name__)


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


class MigrationFailed(Exception):
    """The database refused the migration (e.g. a role without rights); the message is the
    database's reason, without the URL."""


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database to `revision` (default: the newest); raise MigrationFailed with
    the database's reason when it refuses or cannot be reached."""
    from alembic import command

    def run(connection: Connection) -> None:
        command.upgrade(alembic_config(connection), revision)

    try:
        with translated():
            async with engine.begin() as connection:
                await connection.run_sync(run)
    except (DBAPIError, Unavailable) as error:
        raise MigrationFailed(_reason(error)) from error


def _reason(error: BaseException) -> str:
    """The driver's own first line behind `error` (Unavailable hides it as its context)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, DBAPIError):
            return (str(seen.orig).strip().splitlines() or [type(seen.orig).__name__])[0]
        seen = seen.__cause__ or seen.__context__
    return str(error)


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


async def is_current(url: str) -> bool:
    """Tell whether the database at `url` is at the newest revision, asking its driver
    directly (no engine). False when it is behind, or when asking fails: the caller then
    takes the engine's path, which migrates or reports the failure."""
    parsed = make_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            stored = _sqlite_revision(parsed.database)
        else:
            stored = await _postgres_revision(
                parsed.set(drivername="postgresql").render_as_string(hide_password=False)
            )
    except Exception as error:  # any doubt: the engine's path decides, and reports it
        log.debug(
            "schema version not read directly (%s): migrating through the engine",
            type(error).__name__,
        )
        return False
    return stored is not None and stored == head_revision()


def _sqlite_revision(database: str | None) -> str | None:
    if not database or database == ":memory:" or not Path(database).is_file():
        return None
    uri = f"file:{Path(database).absolute()}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=DIRECT_TIMEOUT_SECONDS)
    try:
        rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        connection.close()
    return str(rows[0][0]) if len(rows) == 1 else None


async def _postgres_revision(dsn: str) -> str | None:
    import asyncpg

    connection = await asyncpg.connect(dsn, timeout=DIRECT_TIMEOUT_SECONDS)
    try:
        rows = await connection.fetch(
            "SELECT version_num FROM alembic_version", timeout=DIRECT_TIMEOUT_SECONDS
        )
    finally:
        await connection.close()
    return str(rows[0][0]) if len(rows) == 1 else None
