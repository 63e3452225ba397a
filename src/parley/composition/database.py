"""Open a context for the operator commands: the database and the clock, nothing else.

`parley orgs create`, `parley api-keys create` and `parley audit verify` read and write only
the database, so they skip what `composition.context.open_context` opens for the app (an
HTTP client for JWKS fetches, the JWT runtime, Redis or in-process stores): a command line
must answer fast (bench/cli_start.py), and these commands never need Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from parley.clock import Clock
from parley.composition.options import DatabaseOptions
from parley.db.database import Database
from parley.db.migrate import upgrade_if_needed
from parley.services.context import DatabaseContext


@asynccontextmanager
async def open_database_context(
    options: DatabaseOptions, *, clock: Clock, migrate: bool = True
) -> AsyncIterator[DatabaseContext]:
    """Yield a DatabaseContext, the schema brought up to date first (`migrate`), on one
    engine; close its connections afterwards."""
    database = Database.from_url(
        options.url,
        connect_timeout=options.connect_timeout_seconds,
        statement_timeout=options.statement_timeout_seconds,
        pool_timeout=options.pool_timeout_seconds,
        pool_size=options.pool_size,
    )
    try:
        if migrate:
            await upgrade_if_needed(database.engine)
        yield DatabaseContext(db=database, clock=clock)
    finally:
        await database.dispose()
