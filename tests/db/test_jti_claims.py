"""The durable replay guard of embedded mode (issue #9 finding 9), on SQLite and PostgreSQL:
the same contract as the in-process and Redis guards (tests/stores/test_contract.py)."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import event
from tests.stores.conftest import ManualClock

from parley.db.database import Database
from parley.db.jti_claims import DatabaseReplayGuard
from parley.errors import Unavailable

pytestmark = pytest.mark.anyio


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def key() -> str:
    return f"jwt:jti:{secrets.token_hex(32)}"


async def test_jti_claims_first_claim_wins_replay_refused(
    database: Database, clock: ManualClock
) -> None:
    guard, name = DatabaseReplayGuard(database, clock), key()
    expires_at = clock.time() + 60
    assert await guard.claim(name, expires_at=expires_at, issued_at=clock.time()) is True
    assert await guard.claim(name, expires_at=expires_at, issued_at=clock.time()) is False


async def test_jti_claims_survive_a_new_guard_on_the_same_database(
    database: Database, clock: ManualClock
) -> None:
    name, expires_at = key(), clock.time() + 60
    assert await DatabaseReplayGuard(database, clock).claim(
        name, expires_at=expires_at, issued_at=clock.time()
    )
    restarted = DatabaseReplayGuard(database, clock)  # a new process, the same file
    assert await restarted.claim(name, expires_at=expires_at, issued_at=clock.time()) is False


async def test_jti_claims_expired_record_is_taken_over(
    database: Database, clock: ManualClock
) -> None:
    guard, name = DatabaseReplayGuard(database, clock), key()
    assert await guard.claim(name, expires_at=clock.time() + 1, issued_at=clock.time())
    clock.advance(1)
    assert await guard.claim(name, expires_at=clock.time() + 60, issued_at=clock.time())
    assert not await guard.claim(name, expires_at=clock.time() + 60, issued_at=clock.time())


async def test_jti_claims_past_expiry_not_recorded(database: Database, clock: ManualClock) -> None:
    guard, name = DatabaseReplayGuard(database, clock), key()
    past = clock.time() - 1
    assert await guard.claim(name, expires_at=past, issued_at=past - 60) is True
    assert await guard.claim(name, expires_at=past, issued_at=past - 60) is True


async def test_jti_claims_concurrent_claims_exactly_one_wins(
    database: Database, clock: ManualClock
) -> None:
    guard, name = DatabaseReplayGuard(database, clock), key()
    expires_at = clock.time() + 60
    results = await asyncio.gather(
        *(guard.claim(name, expires_at=expires_at, issued_at=clock.time()) for _ in range(8))
    )
    assert sorted(results) == [False] * 7 + [True]


async def test_jti_claims_purge_drops_only_expired(database: Database, clock: ManualClock) -> None:
    guard = DatabaseReplayGuard(database, clock)
    old, fresh = key(), key()
    assert await guard.claim(old, expires_at=clock.time() + 1, issued_at=clock.time())
    assert await guard.claim(fresh, expires_at=clock.time() + 600, issued_at=clock.time())
    clock.advance(2)
    assert await guard.purge() >= 1
    assert not await guard.claim(fresh, expires_at=clock.time() + 600, issued_at=clock.time())


async def test_jti_claims_group_commit_a_burst_shares_transactions(
    database: Database, clock: ManualClock
) -> None:
    """Claims that arrive while one is being written wait for the next transaction, which
    records them all: 64 new keys take a few statements, not 64, and each is won."""
    inserts: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO JTI_CLAIMS"):
            inserts.append(statement)

    def trace(connection: sqlite3.Connection) -> sqlite3.Connection:
        connection.set_trace_callback(lambda statement: record(None, None, statement))
        return connection

    guard, names = DatabaseReplayGuard(database, clock), [key() for _ in range(64)]
    expires_at = clock.time() + 60
    if database.dialect == "sqlite":  # claims go through the direct connection
        await database.write_directly(trace)
    event.listen(database.engine.sync_engine, "before_cursor_execute", record)
    try:
        won = await asyncio.gather(
            *(guard.claim(n, expires_at=expires_at, issued_at=clock.time()) for n in names)
        )
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", record)
    assert won == [True] * 64
    assert 1 <= len(inserts) <= 4, len(inserts)
    replays = [guard.claim(n, expires_at=expires_at, issued_at=clock.time()) for n in names]
    assert await asyncio.gather(*replays) == [False] * 64


async def test_jti_claims_group_commit_database_down_every_waiting_claim_fails(
    clock: ManualClock, tmp_path: Path
) -> None:
    """A batch whose transaction fails answers each of its claims with the failure (503),
    and the next claim is tried afresh."""
    garbage = tmp_path / "broken.db"
    garbage.write_bytes(b"this is not a database" * 100)
    broken = Database.from_url(f"sqlite+aiosqlite:///{garbage}")
    try:
        guard = DatabaseReplayGuard(broken, clock)
        claims = [
            guard.claim(key(), expires_at=clock.time() + 60, issued_at=clock.time())
            for _ in range(5)
        ]
        outcomes = await asyncio.gather(*claims, return_exceptions=True)
        assert [type(o) for o in outcomes] == [Unavailable] * 5
        with pytest.raises(Unavailable):
            await guard.claim(key(), expires_at=clock.time() + 60, issued_at=clock.time())
    finally:
        await broken.dispose()
