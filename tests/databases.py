"""Test databases: a migrated SQLite template per run, and a PostgreSQL database per run.

PostgreSQL is named by PARLEY_TEST_DATABASE_URL (scripts/test sets it to the local server).
Set it to an empty string to run on SQLite only. When it is set and the server does not
answer, the tests fail: they never skip.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from parley.config import normalize_database_url
from parley.db.engine import Timeouts, create_engine
from parley.db.migrate import upgrade
from parley.db.tables import Base

ADMIN_TIMEOUTS = Timeouts(connect=30.0, statement=120.0, pool=30.0)
"""The bounds on the tests' own statements (creating, migrating, dropping a database): on a
machine busy with several test workers, `DROP DATABASE … WITH (FORCE)` can take longer than
the service's 5 s statement bound, which is for requests, not for set-up."""

TEST_SECRET_KEY = "Xk7-WCe3E0wC2C8NCjIqePJ-aopCsseSNxN4fm6vUl0="
"""PARLEY_SECRET_KEY of the tests: no key file is written in the working directory."""


def run_in_own_loop(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine to completion on a fresh loop in a thread (callable from any context)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def postgres_admin_url() -> str | None:
    """Return the PostgreSQL URL the tests may use, or None for SQLite only."""
    value = os.environ.get("PARLEY_TEST_DATABASE_URL", "")
    return normalize_database_url(value) if value else None


def database_kinds() -> list[str]:
    return ["sqlite", "postgres"] if postgres_admin_url() else ["sqlite"]


async def _migrate(url: str) -> None:
    engine = create_engine(url, timeouts=ADMIN_TIMEOUTS)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


def make_sqlite_template(directory: Path) -> Path:
    """Migrate a SQLite file once; tests copy it."""
    path = directory / "template.db"
    run_in_own_loop(_migrate(f"sqlite+aiosqlite:///{path}"))
    return path


def sqlite_copy(template: Path, directory: Path) -> str:
    target = directory / "parley.db"
    shutil.copyfile(template, target)
    return f"sqlite+aiosqlite:///{target}"


def postgres_database() -> Iterator[str]:
    """Create a fresh, migrated PostgreSQL database for this run; drop it afterwards."""
    admin = postgres_admin_url()
    assert admin is not None
    name = f"parley_test_{secrets.token_hex(6)}"
    url = make_url(admin).set(database=name).render_as_string(hide_password=False)

    async def admin_sql(statement: str) -> None:
        engine = create_engine(admin, timeouts=ADMIN_TIMEOUTS)
        try:
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text(statement))
        finally:
            await engine.dispose()

    run_in_own_loop(admin_sql(f'CREATE DATABASE "{name}"'))
    try:
        run_in_own_loop(_migrate(url))
        yield url
    finally:
        run_in_own_loop(admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def empty_tables(url: str) -> None:
    """Delete every row (PostgreSQL), children first, so the next test starts clean.

    DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE gives each of its 20-odd
    tables a new file and waits for them on disk (0.70 s a test here, against 0.12 s), which
    was the largest single cost of the suite (docs/testing.md). All of it is one script
    sent once on a plain asyncpg connection, committed without waiting for the disk (these
    rows are thrown away): 11 ms on an empty database, against 30 ms as a statement each."""
    import asyncpg

    parts = make_url(url)
    deletes = " ".join(
        f'DELETE FROM "{table.name}";'  # noqa: S608 - our own tables' names
        for table in reversed(Base.metadata.sorted_tables)
    )
    connection = await asyncpg.connect(
        host=parts.host,
        port=parts.port,
        user=parts.username,
        password=parts.password,
        database=parts.database,
        timeout=ADMIN_TIMEOUTS.connect,
        command_timeout=ADMIN_TIMEOUTS.statement,
    )
    try:
        await connection.execute(f"BEGIN; SET LOCAL synchronous_commit = off; {deletes} COMMIT;")
    finally:
        await connection.close()
