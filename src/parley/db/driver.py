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
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import Executable, Result
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.result import IteratorResult, SimpleResultMetaData
from sqlalchemy.ext.asyncio import AsyncEngine

from parley.db.engine import Timeouts, postgres_connect_args
from parley.db.errors import breaks_connection

DRIVER_CONNECTIONS = 4
"""asyncpg connections of a process for these statements (opened on demand). A point read
holds one for a round trip of tens of microseconds of the server's time; a burst waits in
the pool's queue, bounded by the pool timeout."""

_Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Plan:
    """How `DriverStatements` runs a statement: compiled once by the engine's dialect."""

    sql: str
    names: tuple[str, ...]
    """The bound parameters' names, in the order of the statement's `$n`."""
    binds: tuple[_Processor, ...]
    """Each parameter's conversion to the driver's value (None: as given)."""
    defaults: Mapping[str, Any]
    """The values the statement binds itself (a `LIMIT`)."""
    columns: tuple[_Processor, ...] | None
    """Each result column's conversion from the driver's value; None when none converts."""


class DriverStatements:
    """One-statement reads and autocommitted writes of PostgreSQL, each one round trip on
    a pooled asyncpg connection; `fallback` (an AUTOCOMMIT engine) runs what it cannot."""

    def __init__(self, engine: AsyncEngine, fallback: AsyncEngine, timeouts: Timeouts) -> None:
        self._engine = engine
        self._fallback = fallback
        self._timeouts = timeouts
        self._dialect: Dialect = engine.dialect
        self._pool: asyncpg.Pool | None = None  # opened by the first statement
        self._opening: asyncio.Lock | None = None
        self._plans: dict[Executable, _Plan | None] = {}
        self._observer: Callable[[str], None] | None = None

    def observe(self, observer: Callable[[str], None] | None) -> None:
        """Hand `observer` the SQL of each statement run here; None stops it."""
        self._observer = observer

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None, /
    ) -> Result[Any]:
        """Run `statement` (one statement, committed on its own); return its rows."""
        plan = self._plan(statement)
        if plan is None:
            async with self._fallback.connect() as connection:
                return (await connection.execute(statement, parameters)).freeze()()
        given = {**plan.defaults, **(parameters or {})}
        values = [
            given[name] if convert is None else convert(given[name])
            for name, convert in zip(plan.names, plan.binds, strict=True)
        ]
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
        if plan.columns is None:
            rows = [tuple(record) for record in records]
        else:
            rows = [
                tuple(
                    value if convert is None else convert(value)
                    for convert, value in zip(plan.columns, record, strict=True)
                )
                for record in records
            ]
        return IteratorResult(SimpleResultMetaData(keys), iter(rows))

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

    def _plan(self, statement: Executable) -> _Plan | None:
        if statement in self._plans:
            return self._plans[statement]
        if len(self._plans) >= _PLANS_MAX:  # statements are built once: never
            self._plans.clear()
        plan = self._plans[statement] = _plan_of(statement, self._dialect)
        return plan

    async def close(self) -> None:
        """Close the pool's connections (a later statement opens it again)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        try:
            await asyncio.wait_for(pool.close(), self._timeouts.pool)
        except TimeoutError:
            pool.terminate()


def _plan_of(statement: Executable, dialect: Dialect) -> _Plan | None:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    if "POSTCOMPILE" in compiled.string:  # an expanding IN: the engine renders it
        return None
    names = tuple(compiled.positiontup or ())
    binds = tuple(
        compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    )
    defaults = {name: bind.value for name, bind in compiled.binds.items() if not bind.required}
    selected = getattr(statement, "selected_columns", None)
    columns = None
    if selected is not None:
        processors = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in selected
        )
        columns = processors if any(p is not None for p in processors) else None
    return _Plan(compiled.string, names, binds, defaults, columns)


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


_PLANS_MAX = 256
