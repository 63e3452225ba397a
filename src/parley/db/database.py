"""The database handle services use: one transaction per unit of work."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from parley import metrics
from parley.db.engine import create_engine, create_sessionmaker
from parley.db.errors import UniqueViolations, translated
from parley.errors import Unavailable


class Database:
    """Owns the engine; hands out transactions whose failures are Parley errors."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions: async_sessionmaker[AsyncSession] = create_sessionmaker(engine)

    @classmethod
    def from_url(cls, url: str) -> Database:
        """Open (lazily) the database at `url`."""
        return cls(create_engine(url))

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
        """Run a trivial query; raise Unavailable when the database does not answer."""
        async with self.transaction() as session:
            await session.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
