"""Issue #9 finding 5: a SQLite file damaged and then restored is served again without a
restart: connections that saw the damage are replaced, not reused."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests import databases
from tests.faults.conftest import assert_unavailable, fault_settings, running_app

pytestmark = pytest.mark.anyio

PAGE = 4096


def damage(path: Path) -> bytes:
    """Overwrite the first page of a quiet database (all checkpointed); return it."""
    with sqlite3.connect(path) as side:
        side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with path.open("r+b") as file:
        first_page = file.read(PAGE)
        file.seek(0)
        file.write(b"\xde\xad\xbe\xef" * (PAGE // 4))
    return first_page


def restore(path: Path, first_page: bytes) -> None:
    with path.open("r+b") as file:
        file.write(first_page)


async def test_sqlite_damaged_then_restored_recovers_without_restart(
    sqlite_template: Path, tmp_path: Path
) -> None:
    url = databases.sqlite_copy(sqlite_template, tmp_path)
    path = Path(url.removeprefix("sqlite+aiosqlite:///"))
    async with running_app(fault_settings(url)) as running:
        client = running.client
        assert (await client.post("/v1/projects", json={"name": "before"})).status_code == 201
        first_page = damage(path)
        try:
            damaged = [await client.get(p) for p in ("/v1/agents", "/v1/projects", "/health")]
            damaged += await asyncio.gather(*(client.get("/v1/projects") for _ in range(4)))
        finally:
            restore(path, first_page)

        for answer in damaged:
            assert_unavailable(answer)
        for _ in range(5):
            assert (await client.get("/v1/projects")).status_code == 200
        restored = await asyncio.gather(*(client.get("/v1/projects") for _ in range(4)))
        assert {answer.status_code for answer in restored} == {200}
        assert (await client.post("/v1/projects", json={"name": "after"})).status_code == 201
        assert (await client.get("/health")).status_code == 200
