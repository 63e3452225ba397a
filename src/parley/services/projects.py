"""Projects group an organization's agents; `main` exists from the start and stays."""

from __future__ import annotations

from parley.clock import utcnow
from parley.db.repos import projects as project_repo
from parley.errors import NameTaken, ProjectNotEmpty, ProjectProtected
from parley.ids import new_id
from parley.records import Page, Project
from parley.services.context import Context
from parley.services.orgs import MAIN_PROJECT
from parley.services.paging import page_of


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


async def list_projects(
    ctx: Context, *, org_id: str, cursor: str | None, limit: int
) -> Page[Project]:
    """List the organization's projects, oldest first."""
    async with ctx.db.read() as session:
        projects = await project_repo.list_page(session, org_id, cursor=cursor, limit=limit)
    return page_of(projects, limit=limit)


async def delete_project(ctx: Context, *, org_id: str, ref: str) -> None:
    """Delete an empty project other than `main`."""
    async with ctx.db.transaction() as session:
        project = await project_repo.resolve(session, org_id, ref)
        if project.name == MAIN_PROJECT:
            raise ProjectProtected()
        if await project_repo.has_agents(session, project.id):
            raise ProjectNotEmpty()
        await project_repo.delete_row(session, project.id)
