"""Test scenarios of projects (API.md section 19)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import ProjectRow, ScenarioRow
from parley.errors import Forbidden, NameTaken, ScenarioNotFound
from parley.ids import looks_like_id
from parley.records import ProjectRef, Scenario

UNIQUE_VIOLATIONS = {
    "uq_test_scenarios_project_id_name": NameTaken,
    "test_scenarios.project_id, test_scenarios.name": NameTaken,
}


def to_record(row: ScenarioRow, project_name: str) -> Scenario:
    return Scenario(
        id=row.id,
        org_id=row.org_id,
        project=ProjectRef(id=row.project_id, name=project_name),
        name=row.name,
        spec=dict(row.spec),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _with_project() -> Any:
    return select(ScenarioRow, ProjectRow.name).join(
        ProjectRow, ProjectRow.id == ScenarioRow.project_id
    )


async def find(
    session: AsyncSession,
    org_id: str,
    name_or_id: str,
    *,
    project_id: str,
    for_update: bool = False,
) -> Scenario:
    """Return the project's scenario named or identified by `name_or_id`.

    Raises ScenarioNotFound, or Forbidden for another organization's scenario ID.
    """
    query = _with_project()
    if looks_like_id(name_or_id, "tscn"):
        query = query.where(ScenarioRow.id == name_or_id)
    else:
        query = query.where(ScenarioRow.project_id == project_id, ScenarioRow.name == name_or_id)
    if for_update:
        query = query.with_for_update(of=ScenarioRow)
    found = (await session.execute(query)).first()
    if found is None:
        raise ScenarioNotFound()
    row, project_name = found
    if row.org_id != org_id:
        raise Forbidden()
    if row.project_id != project_id:
        raise ScenarioNotFound()
    return to_record(row, project_name)


async def insert(
    session: AsyncSession,
    *,
    scenario_id: str,
    org_id: str,
    project: ProjectRef,
    name: str,
    spec: Mapping[str, Any],
    now: datetime,
) -> Scenario:
    row = ScenarioRow(
        id=scenario_id,
        org_id=org_id,
        project_id=project.id,
        name=name,
        spec=dict(spec),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    await session.flush()
    return to_record(row, project.name)


async def replace(
    session: AsyncSession, scenario_id: str, *, name: str, spec: Mapping[str, Any], now: datetime
) -> None:
    """Store a scenario's new name and spec."""
    await session.execute(
        update(ScenarioRow)
        .where(ScenarioRow.id == scenario_id)
        .values(name=name, spec=dict(spec), updated_at=now)
    )


async def remove(session: AsyncSession, scenario_id: str) -> None:
    await session.execute(delete(ScenarioRow).where(ScenarioRow.id == scenario_id))


async def name_taken(
    session: AsyncSession, project_id: str, name: str, *, sparing: str | None = None
) -> bool:
    query = select(ScenarioRow.id).where(
        ScenarioRow.project_id == project_id, ScenarioRow.name == name
    )
    if sparing is not None:
        query = query.where(ScenarioRow.id != sparing)
    return (await session.scalar(query)) is not None


async def list_page(
    session: AsyncSession, project_id: str, *, cursor: str | None, limit: int
) -> list[Scenario]:
    query = paginate(
        _with_project().where(ScenarioRow.project_id == project_id),
        created_at=ScenarioRow.created_at,
        row_id=ScenarioRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(row, project_name) for row, project_name in await session.execute(query)]


async def all_of(session: AsyncSession, project_id: str) -> Sequence[Scenario]:
    """Every scenario of the project, by name."""
    query = _with_project().where(ScenarioRow.project_id == project_id).order_by(ScenarioRow.name)
    return [to_record(row, project_name) for row, project_name in await session.execute(query)]
