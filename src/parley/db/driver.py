"""PostgreSQL's hot one-statement work on asyncpg directly (`Database.point_read()`,
`Database.autocommit()`).

Through SQLAlchemy's async engine one such statement cost about 190 µs of the process's
CPU, asyncpg's own share of it about 30 µs: the pool's checkout and return (greenlets,
events, the isolation level set and reset) and the execution context cost the rest
(docs/performance.md). Here a statement is compiled once, by the engine's own dialect
(the SQL the engine sends, its parameters in the same order), its values and columns are
converted by the same type processors, and it runs on a connection of a small asyncpg pool
set up as the engine sets up its connections (the same JSON codecs, time bounds and server
settings). A statement that only the engine can render (an expanding `IN`) goes through
the engine. asyncpg's own pool is used as it is documented, minus the reset query on
release: these connections run single statements outside transactions and never change
their session's state, so there is nothing to reset.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg
from sqlalchemy import Executable, Result
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.ext.asyncio import AsyncEngine

from parley.db.engine import Timeouts, postgres_connect_args
from parley.db.errors import breaks_connection
from parley.db.plans import Plans

DRIVER_CONNECTIONS = 4
"""asyncpg connections of a process for these statements (opened on demand). A point read
holds one for a round trip of tens of microseconds of the server's time; a burst waits in
the pool's queue, bounded by the pool timeout."""


class DriverStatements:
    """One-statement reads and autocommitted writes of PostgreSQL, each one round trip on
    a pooled asyncpg connection; `fallback` (an AUTOCOMMIT engine) runs what it cannot."""

    def __init__(self, engine: AsyncEngine, fallback: AsyncEngine, timeouts: Timeouts) -> None:
        self._engine = engine
        self._fallback = fallback
        self._timeouts = timeouts
        self._plans = Plans(engine.dialect)
        self._pool: asyncpg.Pool | None = None  # opened by the first statement
        self._opening: asyncio.Lock | None = None
        self._observer: Callable[[str], None] | None = None

    def observe(self, observer: Callable[[str], None] | None) -> None:
        """Hand `observer` the SQL of each statement run here; None stops it."""
        self._observer = observer

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None, /
    ) -> Result[Any]:
        """Run `statement` (one statement, committed on its own); return its rows."""
        plan = self._plans(statement)
        if plan.expanding:
            async with self._fallback.connect() as connection:
                return (await connection.execute(statement, parameters)).freeze()()
        values = plan.values(parameters)
        pool = self._pool or await self._open()
        if self._observer is not None:
            self._observer(plan.sql)
        try:
            async with pool.acquire(timeout=self._timeouts.pool) as connection:
                records = await connection.fetch(plan.sql, *values)
        except asyncpg.IntegrityConstraintViolationError as error:
            # As the engine reports it, so `translated()` names the constraint.
            raise sa_exc.IntegrityError(plan.sql, None, error) from error
        except Exception as error:
            if breaks_connection(error):  # a restart breaks every pooled connection
                await pool.expire_connections()
            raise
        keys = list(records[0].keys()) if records else []
        return IteratorResult(SimpleResultMetaData(keys), iter(plan.rows(records)))

    async def _open(self) -> asyncpg.Pool:
        """Create the pool once (it connects on demand)."""
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                url = self._engine.url
                self._pool = await asyncpg.create_pool(
                    host=url.host,
                    port=url.port,
                    user=url.username,
                    password=url.password,
                    database=url.database,
                    min_size=0,
                    max_size=DRIVER_CONNECTIONS,
                    init=_set_up_codecs,
                    reset=_nothing_to_reset,
                    **postgres_connect_args(self._timeouts),
                )
            return self._pool

    async def close(self) -> None:
        """Close the pool's connections (a later statement opens it again)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), self._timeouts.pool)
        except TimeoutError:
            pool.terminate()


async def _set_up_codecs(connection: asyncpg.Connection) -> None:
    """JSON and JSONB as SQLAlchemy's asyncpg dialect sets them up on its connections, so
    a column reads, and a value binds, the same here as through the engine."""
    await connection.set_type_codec(
        "json",
        encoder=str.encode,
        decoder=lambda data: json.loads(data.decode()),
        schema="pg_catalog",
        format="binary",
    )
    await connection.set_type_codec(
        "jsonb",
        encoder=lambda text: b"\x01" + text.encode(),
        decoder=lambda data: json.loads(data[1:].decode()),
        schema="pg_catalog",
        format="binary",
    )


async def _nothing_to_reset(_connection: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query: see the module's docstring."""
