"""The unit of work the services hold between a repository call and the next.

Services receive a session from `Database.transaction()` or `Database.read()` (or a
connection from `Database.statement()`) and hand it to repositories; they never use it
themselves, so they need no SQLAlchemy import. A repository function that runs one Core
statement takes either (`Reader`). On SQLite a small hot write can run as one thread hop
on a synchronous `DirectConnection` (`Database.write_core_directly`).
"""

from collections.abc import Mapping
from typing import Any, Protocol

from sqlalchemy import Connection as DirectConnection
from sqlalchemy import Executable, Result
from sqlalchemy.ext.asyncio import AsyncSession as Session


class StatementConnection(Protocol):
    """What `Database.statement()` yields: it runs one Core `SELECT` (a pooled
    `AsyncConnection` on PostgreSQL, a reading thread's connection on SQLite)."""

    async def execute(
        self, statement: Executable, parameters: Mapping[str, Any] | None = None, /
    ) -> Result[Any]: ...


class StatementWriter(StatementConnection, Protocol):
    """Where statements that change data can run and note what they changed
    (`mark_changed`, `after_commit`): a transaction's session, or `Database.autocommit()`'s
    connection, whose statements each commit on their own."""

    @property
    def info(self) -> dict[Any, Any]: ...


Reader = Session | StatementConnection
"""Where a one-statement read can run: a transaction's session or a bare connection."""

__all__ = ["DirectConnection", "Reader", "Session", "StatementConnection", "StatementWriter"]
