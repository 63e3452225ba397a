"""PARLEY_DATABASE_POOL_SIZE: a PostgreSQL pool keeps that many connections open and opens
half as many more for a burst, no more (docs/reliability.md)."""

from __future__ import annotations

from contextlib import AsyncExitStack

import pytest
from sqlalchemy import text

from parley.db.database import Database
from parley.errors import Unavailable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_pool_keeps_pool_size_connections_and_half_more_for_bursts(
    database_url: str,
) -> None:
    database = Database.from_url(database_url, pool_size=4, pool_timeout=0.3)
    try:
        async with AsyncExitStack() as held:
            for _ in range(6):  # 4 kept + 2 for the burst
                connection = await held.enter_async_context(database.statement())
                assert (await connection.execute(text("SELECT 1"))).scalar() == 1
            with pytest.raises(Unavailable):
                async with database.statement():
                    pass
        pool = database.engine.pool
        assert (pool.size(), pool.checkedin(), pool.checkedout()) == (4, 4, 0)  # type: ignore[attr-defined]
    finally:
        await database.dispose()
