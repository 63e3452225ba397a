"""Test runs (API.md section 19): queued, claimed by one instance, finished."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.session import Reader
from parley.db.tables import InstanceRow, ScenarioRunRow
from parley.errors import Forbidden, RunNotFound
from parley.ids import looks_like_id
from parley.records import RunStatus, ScenarioResult, ScenarioRun


def result_json(result: ScenarioResult) -> dict[str, Any]:
    return {
        "scenario": result.scenario,
        "passed": result.passed,
        "failures": list(result.failures),
        "conversation_id": result.conversation_id,
        "latencies_ms": list(result.latencies_ms),
    }


def _result(data: Mapping[str, Any]) -> ScenarioResult:
    return ScenarioResult(
        scenario=data["scenario"],
        passed=bool(data["passed"]),
        failures=tuple(data["failures"]),
        conversation_id=data.get("conversation_id"),
        latencies_ms=tuple(data.get("latencies_ms") or ()),
    )


def to_record(row: ScenarioRunRow) -> ScenarioRun:
    return ScenarioRun(
        id=row.id,
        org_id=row.org_id,
        project_id=row.project_id,
        status=RunStatus(row.status),
        scenarios=tuple(dict(spec) for spec in row.scenarios),
        results=tuple(_result(data) for data in row.results),
        server_url=row.server_url,
        claimed_by=row.claimed_by,
        created_at=row.created_at,
        started_at=row.started_at,
        ended_at=row.ended_at,
    )


async def insert(
    session: AsyncSession,
    *,
    run_id: str,
    org_id: str,
    project_id: str,
    scenarios: Sequence[Mapping[str, Any]],
    server_url: str,
    now: datetime,
) -> ScenarioRun:
    row = ScenarioRunRow(
        id=run_id,
        org_id=org_id,
        project_id=project_id,
        status=RunStatus.QUEUED.value,
        scenarios=[dict(spec) for spec in scenarios],
        results=[],
        server_url=server_url,
        claimed_by=None,
        created_at=now,
        started_at=None,
        ended_at=None,
    )
    session.add(row)
    await session.flush()
    return to_record(row)


async def get(session: AsyncSession, org_id: str, run_id: str) -> ScenarioRun:
    """The organization's run; RunNotFound, or Forbidden for another organization's."""
    if not looks_like_id(run_id, "trun"):
        raise RunNotFound()
    row = await session.get(ScenarioRunRow, run_id, populate_existing=True)
    if row is None:
        raise RunNotFound()
    if row.org_id != org_id:
        raise Forbidden()
    return to_record(row)


async def get_any(session: AsyncSession, run_id: str) -> ScenarioRun:
    """A run by ID, whoever's (the runner's own reads)."""
    row = await session.get(ScenarioRunRow, run_id, populate_existing=True)
    if row is None:
        raise RunNotFound()
    return to_record(row)


async def oldest_queued(reader: Reader) -> str | None:
    """The ID of the oldest queued run, or None (one `SELECT`)."""
    oldest = (
        select(ScenarioRunRow.id)
        .where(ScenarioRunRow.status == RunStatus.QUEUED.value)
        .order_by(ScenarioRunRow.created_at, ScenarioRunRow.id)
        .limit(1)
    )
    found: str | None = (await reader.execute(oldest)).scalar()
    return found


async def claim(session: AsyncSession, run_id: str, *, instance_id: str, at: datetime) -> bool:
    """Claim a queued run for `instance_id`; False when it is no longer queued.

    The status is checked by the UPDATE itself, so of two instances claiming the same run
    at once exactly one changes it (on PostgreSQL the second re-reads the row and finds it
    `running`; SQLite writes one at a time)."""
    claimed = await session.execute(
        update(ScenarioRunRow)
        .where(ScenarioRunRow.id == run_id, ScenarioRunRow.status == RunStatus.QUEUED.value)
        .values(status=RunStatus.RUNNING.value, claimed_by=instance_id, started_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(claimed, "rowcount", 0))


async def add_result(session: AsyncSession, run_id: str, result: ScenarioResult) -> None:
    """Append one scenario's result to a running run (its row locked)."""
    row = await session.get(ScenarioRunRow, run_id, with_for_update=True, populate_existing=True)
    if row is None or row.status != RunStatus.RUNNING.value:
        return
    row.results = [*row.results, result_json(result)]
    await session.flush()


async def finish(
    session: AsyncSession,
    run_id: str,
    *,
    status: RunStatus,
    extra_results: Sequence[ScenarioResult] = (),
    at: datetime,
) -> ScenarioRun | None:
    """End a running run with `status`; None if it is not running (ended already)."""
    row = await session.get(ScenarioRunRow, run_id, with_for_update=True, populate_existing=True)
    if row is None or row.status != RunStatus.RUNNING.value:
        return None
    row.status = status.value
    row.results = [*row.results, *(result_json(result) for result in extra_results)]
    row.ended_at = at
    await session.flush()
    return to_record(row)


async def orphaned(reader: Reader, *, stale_before: datetime, own: str | None) -> list[str]:
    """Running runs whose instance's lease ran out (or that is gone), and `own`'s."""
    alive = select(InstanceRow.id).where(InstanceRow.heartbeat_at >= stale_before)
    condition = or_(ScenarioRunRow.claimed_by.is_(None), ScenarioRunRow.claimed_by.not_in(alive))
    if own is not None:
        condition = or_(condition, ScenarioRunRow.claimed_by == own)
    query = select(ScenarioRunRow.id).where(
        ScenarioRunRow.status == RunStatus.RUNNING.value, condition
    )
    return list((await reader.execute(query)).scalars())


async def latest(session: AsyncSession, project_id: str, *, limit: int) -> list[ScenarioRun]:
    """The project's `limit` latest runs, newest first (the dashboard's list)."""
    query = (
        select(ScenarioRunRow)
        .where(ScenarioRunRow.project_id == project_id)
        .order_by(ScenarioRunRow.created_at.desc(), ScenarioRunRow.id.desc())
        .limit(limit)
    )
    return [to_record(row) for row in await session.scalars(query)]
