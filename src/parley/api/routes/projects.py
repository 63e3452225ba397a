"""Projects (API.md sections 3 and 17)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.schemas import (
    ProjectCreate,
    ProjectEnvelope,
    ProjectList,
    ProjectOut,
    SuccessOut,
    error_responses,
)
from parley.api.workspace_schemas import ProjectCreatedOut, ProjectUpdate
from parley.errors import ValidationFailed
from parley.services import projects
from parley.text import Label

router = APIRouter(prefix="/v1/projects", tags=["projects"])
NameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the project.")]


@router.get("", response_model=ProjectList, responses=error_responses(400, 401, 403, 503))
async def list_projects(
    ctx: Ctx, principal: ApiKeyPrincipal, cursor: CursorParam = None, limit: LimitParam = 100
) -> ProjectList:
    """List the organization's projects."""
    page = await projects.list_project_views(
        ctx, org_id=principal.org_id, cursor=cursor, limit=limit
    )
    return ProjectList(
        projects=[ProjectOut.of(v.project, v.active_conversations) for v in page.items],
        next_cursor=page.next_cursor,
    )


@router.post(
    "",
    status_code=201,
    response_model=ProjectCreatedOut,
    responses=error_responses(400, 401, 403, 409, 413, 503),
)
async def create_project(
    ctx: Ctx, principal: ApiKeyPrincipal, body: ProjectCreate
) -> ProjectCreatedOut:
    """Create a project; 409 `name_taken` if the name is in use."""
    project = await projects.create_project(ctx, org_id=principal.org_id, name=body.name)
    return ProjectCreatedOut(id=project.id, name=project.name, project=ProjectOut.of(project))


@router.get(
    "/{nameOrId}", response_model=ProjectEnvelope, responses=error_responses(401, 403, 404, 503)
)
async def get_project(
    ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId
) -> ProjectEnvelope:
    """Return one project."""
    view = await projects.view_project(ctx, org_id=principal.org_id, ref=name_or_id)
    return ProjectEnvelope(project=ProjectOut.of(view.project, view.active_conversations))


@router.patch(
    "/{nameOrId}",
    response_model=SuccessOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_project(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    body: ProjectUpdate,
) -> SuccessOut:
    """Change a project's name (never `main`'s: 409 `project_protected`), default agent or
    cap on active conversations."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    await projects.update_project(
        ctx, org_id=principal.org_id, ref=name_or_id, patch=body.patch(), actor=actor
    )
    return SuccessOut(success=True)


@router.delete(
    "/{nameOrId}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 409, 503)
)
async def delete_project(ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId) -> SuccessOut:
    """Delete an empty project; `main` cannot be deleted (409 `project_protected`)."""
    await projects.delete_project(ctx, org_id=principal.org_id, ref=name_or_id)
    return SuccessOut(success=True)
