"""Holding this process's SQLite writer turn, for tests of what waits for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from parley.db.database import Database


@asynccontextmanager
async def writer_turn_held(
    database: Database, order: list[str] | None = None
) -> AsyncIterator[None]:
    """Hold a transaction open (appending "transaction" to `order` once it holds the turn)
    until the block ends; it then commits, and is awaited."""
    release = asyncio.Event()
    held = asyncio.Event()

    async def hold() -> None:
        async with database.transaction():
            if order is not None:
                order.append("transaction")
            held.set()
            await release.wait()

    holder = asyncio.ensure_future(hold())
    await held.wait()
    try:
        yield
    finally:
        release.set()
        await holder
