"""Instances and their heartbeats: the leases on live conversations."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, Update, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import InstanceRow


async def register(session: AsyncSession, instance_id: str, *, at: datetime) -> None:
    """Record the instance as started and alive at `at` (its row is replaced)."""
    await session.execute(delete(InstanceRow).where(InstanceRow.id == instance_id))
    session.add(InstanceRow(id=instance_id, started_at=at, heartbeat_at=at))
    await session.flush()


async def beat(session: AsyncSession, instance_id: str, *, at: datetime) -> bool:
    """Renew the instance's lease; False if its row is gone (then register it again)."""
    result = await session.execute(_beat(instance_id, at))
    return bool(getattr(result, "rowcount", 0))


def beat_directly(core: Connection, instance_id: str, *, at: datetime) -> bool:
    """`beat` on a synchronous connection (`Database.write_core_directly`)."""
    return bool(core.execute(_beat(instance_id, at)).rowcount)


def _beat(instance_id: str, at: datetime) -> Update:
    return (
        update(InstanceRow)
        .where(InstanceRow.id == instance_id)
        .values(heartbeat_at=at)
        .execution_options(synchronize_session=False)
    )


async def retire(session: AsyncSession, instance_id: str) -> None:
    """Forget the instance (it stopped cleanly)."""
    await session.execute(delete(InstanceRow).where(InstanceRow.id == instance_id))


async def forget_stale(session: AsyncSession, *, before: datetime) -> None:
    """Delete instances silent since before `before`: their conversations are ended.

    Rows another instance's sweep is deleting are skipped, not waited for: two sweeps at
    once never wait on each other's row locks, so they can neither deadlock nor time out
    (SQLite, which locks the whole database, ignores the clause)."""
    stale = (
        select(InstanceRow.id)
        .where(InstanceRow.heartbeat_at < before)
        .with_for_update(skip_locked=True)
    )
    await session.execute(delete(InstanceRow).where(InstanceRow.id.in_(stale)))
