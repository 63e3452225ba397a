"""Projects: name-or-ID lookup scoped to an organization."""

from __future__ import annotations

from sqlalchemy import delete, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import AgentRow, ProjectRow
from parley.errors import Forbidden, NameTaken, ProjectNotFound
from parley.ids import looks_like_id
from parley.records import Project

UNIQUE_VIOLATIONS = {
    "uq_projects_org_id_name": NameTaken,
    "projects.org_id, projects.name": NameTaken,
}


def to_record(row: ProjectRow) -> Project:
    return Project(id=row.id, org_id=row.org_id, name=row.name, created_at=row.created_at)


async def insert(session: AsyncSession, project: Project) -> None:
    session.add(
        ProjectRow(
            id=project.id, org_id=project.org_id, name=project.name, created_at=project.created_at
        )
    )
    await session.flush()


async def resolve(session: AsyncSession, org_id: str, name_or_id: str) -> Project:
    """Return the organization's project named or identified by `name_or_id`.

    Raises ProjectNotFound, or Forbidden when the ID belongs to another organization.
    """
    if looks_like_id(name_or_id, "proj"):
        row = await session.get(ProjectRow, name_or_id)
        if row is None:
            raise ProjectNotFound()
        if row.org_id != org_id:
            raise Forbidden()
        return to_record(row)
    row = await session.scalar(
        select(ProjectRow).where(ProjectRow.org_id == org_id, ProjectRow.name == name_or_id)
    )
    if row is None:
        raise ProjectNotFound()
    return to_record(row)


async def name_taken(session: AsyncSession, org_id: str, name: str) -> bool:
    return (
        await session.scalar(
            select(ProjectRow.id).where(ProjectRow.org_id == org_id, ProjectRow.name == name)
        )
    ) is not None


async def has_agents(session: AsyncSession, project_id: str) -> bool:
    return bool(await session.scalar(select(exists().where(AgentRow.project_id == project_id))))


async def list_page(
    session: AsyncSession, org_id: str, *, cursor: str | None, limit: int
) -> list[Project]:
    query = paginate(
        select(ProjectRow).where(ProjectRow.org_id == org_id),
        created_at=ProjectRow.created_at,
        row_id=ProjectRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(row) for row in await session.scalars(query)]


async def delete_row(session: AsyncSession, project_id: str) -> None:
    await session.execute(delete(ProjectRow).where(ProjectRow.id == project_id))
