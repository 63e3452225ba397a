"""Used JWT `jti`s kept in the database: replay protection that survives a restart.

Embedded mode has no Redis; keeping the claims in process memory let a token used before a
restart work again after it (issue #9, finding 9). One upsert claims a key atomically on
SQLite and PostgreSQL: it inserts the key, or takes over a record whose time has passed,
and returns a row only when it did either.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite

from parley.clock import Clock
from parley.db.database import Database
from parley.db.tables import JtiClaimRow


class DatabaseReplayGuard:
    """The `ReplayGuard` of embedded mode: claims live in the `jti_claims` table."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

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
        now = self._clock.time()
        if expires_at <= now:
            return True  # as in Redis: a key already past its time is not recorded
        insert = postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert
        statement = (
            insert(JtiClaimRow)
            .values(key=key, expires_at=expires_at)
            .on_conflict_do_update(
                index_elements=[JtiClaimRow.key],
                set_={"expires_at": expires_at},
                where=JtiClaimRow.expires_at <= now,
            )
            .returning(JtiClaimRow.key)
        )
        async with self._db.transaction() as session:
            claimed = await session.scalar(statement)
        return claimed is not None

    async def purge(self) -> int:
        """Delete the records whose time has passed; return how many."""
        async with self._db.transaction() as session:
            result = await session.execute(
                delete(JtiClaimRow).where(JtiClaimRow.expires_at <= self._clock.time())
            )
        return int(getattr(result, "rowcount", 0) or 0)
