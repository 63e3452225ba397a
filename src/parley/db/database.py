"""The database handle services use: one transaction per unit of work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from parley import metrics
from parley.db.engine import Timeouts, create_engine, create_sessionmaker
from parley.db.errors import RETRY_AFTER_SECONDS, UniqueViolations, translated
from parley.errors import Unavailable


class Database:
    """Owns the engine; hands out transactions whose failures are Parley errors."""

    def __init__(self, engine: AsyncEngine, timeouts: Timeouts | None = None) -> None:
        self.engine = engine
        self.timeouts = timeouts or Timeouts()
        self._sessions: async_sessionmaker[AsyncSession] = create_sessionmaker(engine)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        connect_timeout: float | None = None,
        statement_timeout: float | None = None,
        pool_timeout: float | None = None,
    ) -> Database:
        """Open (lazily) the database at `url`; waits on it are bounded (seconds)."""
        defaults = Timeouts()
        timeouts = Timeouts(
            connect=connect_timeout or defaults.connect,
            statement=statement_timeout or defaults.statement,
            pool=pool_timeout or defaults.pool,
        )
        return cls(create_engine(url, timeouts=timeouts), timeouts)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @asynccontextmanager
    async def transaction(
        self, unique_violations: UniqueViolations | None = None
    ) -> AsyncIterator[AsyncSession]:
        """Yield a session inside one transaction: committed on success, else rolled back."""
        try:
            with translated(unique_violations):
                async with self._sessions() as session, session.begin():
                    yield session
        except Unavailable as error:
            if type(error) is Unavailable:  # what translated() makes of a database failure
                metrics.count_store_error("database")
            raise

    async def ping(self) -> None:
        """Run a trivial query; raise Unavailable unless the database answers in time.

        The deadline covers a pool checkout, a connection and one statement, so a hung
        database is reported within about `pool + connect + statement` seconds.
        """
        bound = self.timeouts.pool + self.timeouts.connect + self.timeouts.statement
        try:
            async with asyncio.timeout(bound), self.transaction() as session:
                await session.execute(text("SELECT 1"))
        except TimeoutError:
            raise Unavailable(retry_after=RETRY_AFTER_SECONDS) from None

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
