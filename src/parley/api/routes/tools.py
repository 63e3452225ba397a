"""Tools (API.md section 12): the custom tools agents may call."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from parley.api.deps import (
    ApiKeyActor,
    ApiKeyPrincipal,
    Ctx,
    CursorParam,
    LimitParam,
    ProjectParam,
)
from parley.api.schemas import SuccessOut, error_responses
from parley.api.tool_schemas import (
    ToolCreate,
    ToolCreated,
    ToolEnvelope,
    ToolList,
    ToolOut,
    ToolUpdate,
)
from parley.errors import ValidationFailed
from parley.services import tools
from parley.text import Label

router = APIRouter(prefix="/v1/tools", tags=["tools"])
NameOrId = Annotated[Label, Path(alias="nameOrId", description="Name or ID of the tool.")]
ONE_TOOL_ERRORS = error_responses(400, 401, 403, 404, 503)


@router.get("", response_model=ToolList, responses=error_responses(400, 401, 403, 404, 503))
async def list_tools(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectParam = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> ToolList:
    """List the organization's tools (in one project when `project` is given)."""
    page = await tools.list_tools(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return ToolList(tools=[ToolOut.of(t) for t in page.items], next_cursor=page.next_cursor)


@router.post(
    "",
    status_code=201,
    response_model=ToolCreated,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_tool(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: ToolCreate,
    project: ProjectParam = None,
) -> ToolCreated:
    """Create a tool; the answer holds its signing secret, shown this once."""
    if body.project and project and body.project != project:
        raise ValidationFailed(param_errors={"project": "differs from the ?project= parameter"})
    issued = await tools.create_tool(
        ctx, org_id=principal.org_id, project=body.project or project, spec=body.spec(), actor=actor
    )
    tool = issued.tool
    return ToolCreated(id=tool.id, name=tool.name, signing_secret=issued.signing_secret)


@router.get("/{nameOrId}", response_model=ToolEnvelope, responses=ONE_TOOL_ERRORS)
async def get_tool(
    ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId, project: ProjectParam = None
) -> ToolEnvelope:
    """Return one tool (never its signing secret)."""
    tool = await tools.get_tool(ctx, org_id=principal.org_id, ref=name_or_id, project=project)
    return ToolEnvelope(tool=ToolOut.of(tool))


@router.patch(
    "/{nameOrId}",
    response_model=SuccessOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_tool(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    body: ToolUpdate,
    project: ProjectParam = None,
) -> SuccessOut:
    """Update some fields of a tool; the result is checked as a whole tool."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    patch = body.patch()
    await tools.update_tool(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, patch=patch, actor=actor
    )
    return SuccessOut(success=True)


@router.delete(
    "/{nameOrId}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 409, 503)
)
async def delete_tool(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Delete a tool; 409 `tool_in_use` while an agent lists it."""
    await tools.delete_tool(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)
