"""The dashboard overview's reads (services/overview.py): an organization's conversations
created between two instants, day by day.

Both read only the rows of that window, through `ix_conversations_org_id_created_at`
(never the organization's whole history): `endings` counts them in the database, grouped by
day and `ended_by`; `timings` streams what they measured, a batch at a time, so the caller
holds one batch in memory, whatever the number of conversations. A day is given by its
bounds: `bounds[i] <= created_at < bounds[i + 1]` is day `i`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, func, literal, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.tables import ConversationRow
from parley.records import ConversationTimings, EndingCount

BATCH = 500
"""Rows fetched at a time by `timings`."""


def _window(org_id: str, bounds: Sequence[datetime]) -> ColumnElement[bool]:
    created = ConversationRow.created_at
    return and_(ConversationRow.org_id == org_id, created >= bounds[0], created < bounds[-1])


def _day(bounds: Sequence[datetime]) -> ColumnElement[int]:
    """The day index of a row of the window: one comparison per inner bound, the same SQL
    on SQLite and PostgreSQL (no date function, whose names and zones differ)."""
    inner = bounds[1:-1]
    if not inner:
        return literal(0)
    created = ConversationRow.created_at
    return case(*((created < bound, index) for index, bound in enumerate(inner)), else_=len(inner))


def endings_query(org_id: str, bounds: Sequence[datetime]) -> Select[int, str | None, int]:
    """The window's conversations counted per (day, ended_by)."""
    rows = (
        select(_day(bounds).label("day"), ConversationRow.ended_by.label("ended_by"))
        .where(_window(org_id, bounds))
        .subquery()
    )
    # Grouped outside: PostgreSQL would not match a CASE with parameters in GROUP BY to
    # the same CASE in the select list (each gets parameters of its own).
    return select(rows.c.day, rows.c.ended_by, func.count()).group_by(rows.c.day, rows.c.ended_by)


def timings_query(
    org_id: str, bounds: Sequence[datetime]
) -> Select[datetime, list[int], list[dict[str, Any]]]:
    """The window's conversations' creation times, measured latencies and reply stages."""
    return select(
        ConversationRow.created_at, ConversationRow.latencies_ms, ConversationRow.turn_timings
    ).where(_window(org_id, bounds))


async def endings(
    session: AsyncSession, org_id: str, bounds: Sequence[datetime]
) -> list[EndingCount]:
    """Count the window's conversations per day and `ended_by` (None: not ended)."""
    result = await session.execute(endings_query(org_id, bounds))
    return [EndingCount(day=day, ended_by=by, count=count) for day, by, count in result.all()]


async def timings(
    session: AsyncSession, org_id: str, bounds: Sequence[datetime]
) -> AsyncIterator[ConversationTimings]:
    """Yield the window's conversations' timings, fetched `BATCH` rows at a time."""
    query = timings_query(org_id, bounds).execution_options(yield_per=BATCH)
    result = await session.stream(query)
    async for created_at, latencies, turns in result:
        yield ConversationTimings(
            created_at=created_at, latencies_ms=tuple(latencies or ()), turns=tuple(turns or ())
        )
