"""Jobs that one instance at a time runs (the retention sweep): a row per job, leased."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import JobRow


async def claim(
    session: AsyncSession, name: str, *, holder: str, now: datetime, lease: timedelta
) -> bool:
    """Take or renew the job's lease for `holder`; False while another instance holds it.

    The row is created the first time, by an INSERT that does nothing on conflict with the
    primary key: of two instances creating it at once, one inserts and the other (on
    PostgreSQL, once the first commits) finds it there, and the UPDATE below decides."""
    if await session.scalar(select(JobRow.name).where(JobRow.name == name)) is None:
        dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
        await session.execute(
            dialect.insert(JobRow)
            .values(name=name, holder=None, lease_until=None)
            .on_conflict_do_nothing(index_elements=[JobRow.name])
        )
    result = await session.execute(
        update(JobRow)
        .where(
            JobRow.name == name,
            or_(
                JobRow.holder.is_(None),
                JobRow.holder == holder,
                JobRow.lease_until.is_(None),
                JobRow.lease_until < now,
            ),
        )
        .values(holder=holder, lease_until=now + lease)
        .returning(JobRow.name)
        .execution_options(synchronize_session=False)
    )
    return result.first() is not None
