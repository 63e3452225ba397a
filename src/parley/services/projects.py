"""Projects group an organization's agents; `main` exists from the start and stays.

Rules (API.md sections 3 and 17):
1. `main` cannot be deleted, nor renamed (409 `project_protected`): it is the project of
   every request that names none. A project with agents cannot be deleted.
2. `default_agent` names an agent of the project (by name or ID; 400 otherwise), or is
   null; a deleted agent reads as no default.
3. `max_active_conversations` is at least 1, or null (only the workspace's cap applies);
   `active_conversations` is the count services/active_conversations.py keeps.
4. An update locks the project's row and is audited (`project.update`).
"""

from __future__ import annotations

from dataclasses import dataclass

from parley.clock import utcnow
from parley.db.repos import projects as project_repo
from parley.db.session import Session
from parley.errors import (
    AgentNotFound,
    Forbidden,
    NameTaken,
    ProjectNotEmpty,
    ProjectProtected,
    ValidationFailed,
)
from parley.ids import new_id
from parley.records import Actor, Page, Project, ProjectPatch, Unset
from parley.services import active_conversations, audit
from parley.services.agents import find_agent
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of
from parley.services.workspace import check_cap


@dataclass(frozen=True, slots=True)
class ProjectView:
    """A project with its count of active conversations."""

    project: Project
    active_conversations: int


async def create_project(ctx: Context, *, org_id: str, name: str) -> Project:
    """Create a project; names are unique within the organization."""
    project = Project(id=new_id("proj"), org_id=org_id, name=name, created_at=utcnow(ctx.clock))
    async with ctx.db.transaction(project_repo.UNIQUE_VIOLATIONS) as session:
        if await project_repo.name_taken(session, org_id, name):
            raise NameTaken("A project with this name already exists.")
        await project_repo.insert(session, project)
    return project


async def get_project(ctx: Context, *, org_id: str, ref: str) -> Project:
    """Return the project named or identified by `ref`."""
    async with ctx.db.read() as session:
        return await project_repo.resolve(session, org_id, ref)


async def view_project(ctx: Context, *, org_id: str, ref: str) -> ProjectView:
    """Return the project named or identified by `ref`, with its active conversations."""
    project = await get_project(ctx, org_id=org_id, ref=ref)
    (active,) = await active_conversations.count_projects(ctx, [project.id])
    return ProjectView(project, active)


async def list_projects(
    ctx: Context, *, org_id: str, cursor: str | None, limit: int
) -> Page[Project]:
    """List the organization's projects, oldest first."""
    async with ctx.db.read() as session:
        projects = await project_repo.list_page(session, org_id, cursor=cursor, limit=limit)
    return page_of(projects, limit=limit)


async def list_project_views(
    ctx: Context, *, org_id: str, cursor: str | None, limit: int
) -> Page[ProjectView]:
    """List the organization's projects, oldest first, with their active conversations."""
    page = await list_projects(ctx, org_id=org_id, cursor=cursor, limit=limit)
    counts = await active_conversations.count_projects(ctx, [p.id for p in page.items])
    return Page(
        items=[ProjectView(p, n) for p, n in zip(page.items, counts, strict=True)],
        next_cursor=page.next_cursor,
    )


async def update_project(
    ctx: Context, *, org_id: str, ref: str, patch: ProjectPatch, actor: Actor
) -> None:
    """Change the members given (rules 1 to 4)."""
    values: dict[str, object] = {}
    if not isinstance(patch.max_active_conversations, Unset):
        values["max_active_conversations"] = check_cap(
            "max_active_conversations", patch.max_active_conversations
        )
    async with ctx.db.transaction(project_repo.UNIQUE_VIOLATIONS) as session:
        project = await project_repo.resolve(session, org_id, ref)
        await project_repo.lock(session, project.id)
        if not isinstance(patch.name, Unset) and patch.name != project.name:
            if project.name == MAIN_PROJECT:
                raise ProjectProtected("The main project cannot be renamed.")
            if await project_repo.name_taken(session, org_id, patch.name):
                raise NameTaken("A project with this name already exists.")
            values["name"] = patch.name
        if not isinstance(patch.default_agent, Unset):
            values["default_agent_id"] = await _agent_of(session, project, patch.default_agent)
        await project_repo.change(session, project.id, values)
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="project.update",
            target=project.id,
            details={"fields": sorted(values)},
        )


async def _agent_of(session: Session, project: Project, ref: str | None) -> str | None:
    """The ID of the project's agent `ref` (a name or an ID), or None to clear it (rule 2)."""
    if ref is None:
        return None
    try:
        agent = await find_agent(session, project.org_id, ref, project.id)
    except (AgentNotFound, Forbidden):
        agent = None
    if agent is None or agent.project_id != project.id:
        raise ValidationFailed(param_errors={"default_agent": "is not an agent of the project"})
    return agent.id


async def delete_project(ctx: Context, *, org_id: str, ref: str) -> None:
    """Delete an empty project other than `main`."""
    async with ctx.db.transaction() as session:
        project = await project_repo.resolve(session, org_id, ref)
        if project.name == MAIN_PROJECT:
            raise ProjectProtected()
        if await project_repo.has_agents(session, project.id):
            raise ProjectNotEmpty()
        await project_repo.delete_row(session, project.id)
