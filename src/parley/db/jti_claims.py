"""Used JWT `jti`s kept in the database: replay protection that survives a restart.

Embedded mode has no Redis; keeping the claims in process memory let a token used before a
restart work again after it (issue #9, finding 9). One upsert claims keys atomically on
SQLite and PostgreSQL: it inserts each key, or takes over a record whose time has passed,
and returns the keys it did either for.

Group commit: the claims that arrive while a claim transaction runs wait for the next one,
which records them all with one statement. Every claim still answers only after its record
is committed (as durable as one transaction each), but a burst of new tokens costs one
write-lock acquisition on SQLite instead of one each, and never a busy wait between claims
of this process (docs/performance.md, issue #11). On SQLite the transaction runs on the
database's direct connection (`Database.write_directly`): one thread hop for `BEGIN`, the
upsert and `COMMIT` (issue #23).

Spent records (past their `expires_at`) refuse nothing: the upsert takes them over. The
housekeeping timer deletes them with `sweep`, a bounded batch per transaction, so a burst of
tokens that expire together is never one long delete holding the writer, and the claims
queued behind it, for as long as it takes (issue #38 item 11).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, field

from sqlalchemy import bindparam, delete, select
from sqlalchemy.dialects import postgresql

from parley.clock import Clock
from parley.db.database import Database
from parley.db.tables import JtiClaimRow

MAX_BATCH = 500
"""Keys per statement: two bound values each, well inside SQLite's variable limit."""
SWEEP_BATCH = 500
"""Spent records deleted by one `sweep`: one short transaction, however many expired."""

_SQLITE_CLAIM = (
    "INSERT INTO jti_claims (key, expires_at) VALUES {rows} "
    "ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at "
    "WHERE jti_claims.expires_at <= ? RETURNING key"
)
"""The upsert below, written out for SQLite's direct connection (`Database.write_directly`):
one thread hop for the whole claim transaction."""

_SQLITE_SWEEP = (
    "DELETE FROM jti_claims WHERE key IN (SELECT key FROM jti_claims WHERE expires_at <= ? LIMIT ?)"
)
"""One batch of spent records by the `expires_at` index, on the direct connection."""
_SPENT = select(JtiClaimRow.key).where(JtiClaimRow.expires_at <= bindparam("now")).limit(1)
"""Is any record spent? Read first, so that a sweep with nothing to do writes nothing."""

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Claim:
    key: str
    expires_at: float
    answer: asyncio.Future[bool] = field(repr=False)


class DatabaseReplayGuard:
    """The `ReplayGuard` of embedded mode: claims live in the `jti_claims` table."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._queued: list[_Claim] = []
        self._writer: asyncio.Task[None] | None = None

    async def claim(
        self,
        key: str,
        *,
        expires_at: float,
        issued_at: float,  # noqa: ARG002
    ) -> bool:
        """Record `key` until `expires_at`; return False if a live record holds it.

        The database keeps every claim durably, so `issued_at` is not needed.
        """
        if expires_at <= self._clock.time():
            return True  # as in Redis: a key already past its time is not recorded
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._queued.append(_Claim(key, expires_at, answer))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_queued())
        return await answer

    async def _write_queued(self) -> None:
        """Commit the queued claims, a batch per transaction, until none is left."""
        batch: list[_Claim] = []
        try:
            while self._queued:
                batch, self._queued = self._queued, []
                try:
                    claimed = await self._record(batch)
                except Exception as error:  # each waiting request answers with it (503)
                    for waiting in batch:
                        if not waiting.answer.done():
                            waiting.answer.set_exception(error)
                    continue
                for waiting in batch:
                    if not waiting.answer.done():
                        waiting.answer.set_result(waiting.key in claimed)
                        claimed.discard(waiting.key)  # a key twice in one batch: once
                batch = []
        finally:
            self._writer = None
            unanswered = [w for w in batch + self._queued if not w.answer.done()]
            for waiting in unanswered:  # cancelled (shutdown) with claims in the air
                waiting.answer.cancel()
            if unanswered:
                log.warning("jti claims unanswered at shutdown: %d", len(unanswered))
            self._queued = []

    async def _record(self, batch: list[_Claim]) -> set[str]:
        """Insert or take over each key of `batch` in one transaction; return those won."""
        now = self._clock.time()
        first: dict[str, float] = {}
        for waiting in batch:
            first.setdefault(waiting.key, waiting.expires_at)
        if self._db.dialect == "sqlite":
            pairs = list(first.items())
            return await self._db.write_directly(lambda c: _claim_on_sqlite(c, pairs, now))
        rows = [{"key": key, "expires_at": at} for key, at in first.items()]
        insert = postgresql.insert
        claimed: set[str] = set()
        async with self._db.transaction() as session:
            for start in range(0, len(rows), MAX_BATCH):
                values = insert(JtiClaimRow).values(rows[start : start + MAX_BATCH])
                statement = values.on_conflict_do_update(
                    index_elements=[JtiClaimRow.key],
                    set_={"expires_at": values.excluded.expires_at},
                    where=JtiClaimRow.expires_at <= now,
                ).returning(JtiClaimRow.key)
                claimed.update((await session.scalars(statement)).all())
        return claimed

    async def sweep(self, *, limit: int = SWEEP_BATCH) -> int:
        """Delete at most `limit` records whose time has passed; return how many.

        One short transaction in the writer's turn (on SQLite in the direct connection's
        thread, off the event loop), after a one-row read that finds whether any record is
        spent at all: with none, nothing is written. Call again while it returns `limit`.
        Nothing a claim decides changes: a spent record no longer refuses its key.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        now = self._clock.time()
        async with self._db.point_read() as connection:  # by the `expires_at` index
            spent = (await connection.execute(_SPENT, {"now": now})).first()
        if spent is None:
            return 0
        if self._db.dialect == "sqlite":
            return await self._db.write_directly(lambda c: _sweep_on_sqlite(c, now, limit))
        batch = select(JtiClaimRow.key).where(JtiClaimRow.expires_at <= now).limit(limit)
        async with self._db.transaction() as session:
            result = await session.execute(delete(JtiClaimRow).where(JtiClaimRow.key.in_(batch)))
        return int(getattr(result, "rowcount", 0) or 0)


def _sweep_on_sqlite(connection: sqlite3.Connection, now: float, limit: int) -> int:
    return connection.execute(_SQLITE_SWEEP, (now, limit)).rowcount


def _claim_on_sqlite(
    connection: sqlite3.Connection, pairs: list[tuple[str, float]], now: float
) -> set[str]:
    claimed: set[str] = set()
    for start in range(0, len(pairs), MAX_BATCH):
        chunk = pairs[start : start + MAX_BATCH]
        statement = _SQLITE_CLAIM.format(rows=", ".join(["(?, ?)"] * len(chunk)))
        values = [value for pair in chunk for value in pair]
        claimed.update(key for (key,) in connection.execute(statement, [*values, now]))
    return claimed
