"""The durable replay guard of embedded mode (issue #9 finding 9), on SQLite and PostgreSQL:
the same contract as the in-process and Redis guards (tests/stores/test_contract.py)."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import event, func, select
from tests.databases import TEST_SECRET_KEY
from tests.stores.conftest import ManualClock

from parley.composition.context import open_context
from parley.composition.options import RuntimeOptions
from parley.db.database import Database
from parley.db.jti_claims import SWEEP_BATCH, DatabaseReplayGuard
from parley.db.tables import JtiClaimRow
from parley.errors import Unavailable
from parley.services.housekeeping import housekeeping

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


async def records(database: Database) -> int:
    async with database.read() as session:
        return int(await session.scalar(select(func.count()).select_from(JtiClaimRow)) or 0)


async def test_jti_claims_sweep_drops_only_spent(database: Database, clock: ManualClock) -> None:
    guard = DatabaseReplayGuard(database, clock)
    old, fresh = key(), key()
    assert await guard.claim(old, expires_at=clock.time() + 1, issued_at=clock.time())
    assert await guard.claim(fresh, expires_at=clock.time() + 600, issued_at=clock.time())
    clock.advance(2)
    assert await guard.sweep() == 1
    assert await records(database) == 1
    assert not await guard.claim(fresh, expires_at=clock.time() + 600, issued_at=clock.time())


async def test_jti_claims_sweep_deletes_at_most_one_batch(
    database: Database, clock: ManualClock
) -> None:
    """1,200 records spent together go a batch of `limit` per call, each its own short
    transaction; the live ones stay and still refuse their keys."""
    guard = DatabaseReplayGuard(database, clock)
    spent, live = [key() for _ in range(1_200)], [key() for _ in range(3)]
    soon, later = clock.time() + 1, clock.time() + 600
    claimed = await asyncio.gather(
        *(guard.claim(n, expires_at=soon, issued_at=clock.time()) for n in spent),
        *(guard.claim(n, expires_at=later, issued_at=clock.time()) for n in live),
    )
    assert all(claimed)
    clock.advance(2)
    swept = []
    for _ in range(4):
        swept.append(await guard.sweep(limit=500))
        assert await records(database) == 1_203 - sum(swept)
    assert swept == [500, 500, 200, 0]
    replays = [guard.claim(n, expires_at=later, issued_at=clock.time()) for n in live]
    assert await asyncio.gather(*replays) == [False] * 3


async def test_jti_claims_sweep_with_nothing_spent_writes_nothing(
    database: Database, clock: ManualClock
) -> None:
    """A sweep that finds no spent record (one read by the `expires_at` index) starts no
    write transaction: the timer's sweep costs the writer nothing while tokens are live."""
    guard = DatabaseReplayGuard(database, clock)
    assert await guard.claim(key(), expires_at=clock.time() + 600, issued_at=clock.time())
    writes: list[str] = []

    def record(statement: str) -> None:
        if statement.lstrip().upper().startswith(("BEGIN", "DELETE", "COMMIT")):
            writes.append(statement)

    def trace(connection: sqlite3.Connection) -> sqlite3.Connection:
        connection.set_trace_callback(record)
        return connection

    def on_engine(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        record(statement)

    if database.dialect == "sqlite":  # sweeps go through the direct connection
        await database.write_directly(trace)
        writes.clear()  # the COMMIT of the transaction that set the trace
    event.listen(database.engine.sync_engine, "before_cursor_execute", on_engine)
    try:
        assert await guard.sweep() == 0
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", on_engine)
    assert writes == []


async def test_jti_claims_sweep_runs_off_the_event_loop(
    sqlite_database: Database, clock: ManualClock
) -> None:
    """On SQLite the delete runs in the direct connection's thread, never the loop's."""
    guard = DatabaseReplayGuard(sqlite_database, clock)
    assert await guard.claim(key(), expires_at=clock.time() + 1, issued_at=clock.time())
    clock.advance(2)
    deleting: list[str] = []

    def trace(connection: sqlite3.Connection) -> sqlite3.Connection:
        def record(statement: str) -> None:
            if statement.lstrip().upper().startswith("DELETE"):
                deleting.append(threading.current_thread().name)

        connection.set_trace_callback(record)
        return connection

    await sqlite_database.write_directly(trace)
    assert await guard.sweep() == 1
    assert len(deleting) == 1
    assert deleting[0] != threading.current_thread().name
    assert deleting[0].startswith("parley-sqlite-direct")


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


async def test_housekeeping_sweeps_spent_jti_records(database_url: str) -> None:
    """The serving instance's timer deletes the spent records, more than one batch of them,
    and keeps the live ones (embedded mode: no Redis to expire them)."""
    clock = ManualClock(start=time.time())
    options = RuntimeOptions(
        database_url=database_url,
        redis_url=None,
        default_audience="127.0.0.1",
        secret_key=TEST_SECRET_KEY,
    )
    async with open_context(options, clock=clock) as ctx:
        guard = ctx.jwt.replay_guard
        assert isinstance(guard, DatabaseReplayGuard)
        spent, live = [key() for _ in range(SWEEP_BATCH + 100)], [key(), key()]
        claimed = await asyncio.gather(
            *(guard.claim(n, expires_at=clock.time() + 1, issued_at=clock.time()) for n in spent),
            *(guard.claim(n, expires_at=clock.time() + 600, issued_at=clock.time()) for n in live),
        )
        assert all(claimed)
        clock.advance(2)
        async with housekeeping(ctx):
            deadline = asyncio.get_running_loop().time() + 15
            while await records(ctx.db) > len(live):
                assert asyncio.get_running_loop().time() < deadline, "the timer swept nothing"
                await asyncio.sleep(0.05)
        assert await records(ctx.db) == len(live)
        replays = [
            guard.claim(n, expires_at=clock.time() + 600, issued_at=clock.time()) for n in live
        ]
        assert await asyncio.gather(*replays) == [False, False]
