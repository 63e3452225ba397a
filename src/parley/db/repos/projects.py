"""Projects: name-or-ID lookup scoped to an organization; a project's settings (API.md
sections 3 and 17)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Select, delete, exists, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from parley.db.pagination import paginate
from parley.db.tables import AgentRow, OrganizationRow, ProjectRow
from parley.errors import Forbidden, NameTaken, ProjectNotFound
from parley.ids import looks_like_id
from parley.records import AgentRef, Project

UNIQUE_VIOLATIONS = {
    "uq_projects_org_id_name": NameTaken,
    "projects.org_id, projects.name": NameTaken,
}


def to_record(row: ProjectRow, default_agent_name: str | None = None) -> Project:
    """A project; its default agent only if that agent still exists (its name found)."""
    default = None
    if row.default_agent_id is not None and default_agent_name is not None:
        default = AgentRef(id=row.default_agent_id, name=default_agent_name)
    return Project(
        id=row.id,
        org_id=row.org_id,
        name=row.name,
        created_at=row.created_at,
        default_agent=default,
        max_active_conversations=row.max_active_conversations,
    )


def _with_default_agent() -> Select[ProjectRow, str]:
    return select(ProjectRow, AgentRow.name).outerjoin(
        AgentRow,
        (AgentRow.id == ProjectRow.default_agent_id) & (AgentRow.project_id == ProjectRow.id),
    )


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
        found = (
            await session.execute(_with_default_agent().where(ProjectRow.id == name_or_id))
        ).first()
        if found is None:
            raise ProjectNotFound()
        if found[0].org_id != org_id:
            raise Forbidden()
        return to_record(found[0], found[1])
    found = (
        await session.execute(
            _with_default_agent().where(ProjectRow.org_id == org_id, ProjectRow.name == name_or_id)
        )
    ).first()
    if found is None:
        raise ProjectNotFound()
    return to_record(found[0], found[1])


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
        _with_default_agent().where(ProjectRow.org_id == org_id),
        created_at=ProjectRow.created_at,
        row_id=ProjectRow.id,
        cursor=cursor,
        limit=limit,
    )
    return [to_record(row, name) for row, name in (await session.execute(query)).all()]


async def delete_row(session: AsyncSession, project_id: str) -> None:
    await session.execute(delete(ProjectRow).where(ProjectRow.id == project_id))


async def lock(session: AsyncSession, project_id: str) -> None:
    """Lock the project's row for the rest of the transaction (PostgreSQL; SQLite's
    transactions begin IMMEDIATE)."""
    await session.execute(
        select(ProjectRow.id).where(ProjectRow.id == project_id).with_for_update()
    )


async def change(session: AsyncSession, project_id: str, values: Mapping[str, Any]) -> None:
    """Set the given columns (`name`, `default_agent_id`, `max_active_conversations`)."""
    if values:
        await session.execute(
            update(ProjectRow).where(ProjectRow.id == project_id).values(**values)
        )


async def caps_of(session: AsyncSession, project_id: str) -> tuple[int | None, int | None]:
    """Return the caps on active conversations of a project and of its organization."""
    found = (
        await session.execute(
            select(ProjectRow.max_active_conversations, OrganizationRow.max_active_conversations)
            .join(OrganizationRow, OrganizationRow.id == ProjectRow.org_id)
            .where(ProjectRow.id == project_id)
        )
    ).first()
    return (None, None) if found is None else (found[0], found[1])
