"""The workspace: the organization's own settings (API.md section 17)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, client_address
from parley.api.schemas import SuccessOut, error_responses
from parley.api.workspace_schemas import WorkspaceOut, WorkspaceUpdate
from parley.errors import ValidationFailed
from parley.services import workspace

router = APIRouter(prefix="/v1/workspace", tags=["workspace"])


@router.get("", response_model=WorkspaceOut, responses=error_responses(401, 403, 503))
async def get_workspace(ctx: Ctx, principal: ApiKeyPrincipal) -> WorkspaceOut:
    """Return the workspace's settings and its count of active conversations."""
    return WorkspaceOut.of(await workspace.get_workspace(ctx, org_id=principal.org_id))


@router.patch(
    "", response_model=SuccessOut, responses=error_responses(400, 401, 403, 409, 413, 503)
)
async def update_workspace(
    request: Request,
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: WorkspaceUpdate,
) -> SuccessOut:
    """Change the members given; 400 `would_lock_out` for an `ip_allowlist` without the
    address making the request."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    await workspace.update_workspace(
        ctx,
        org_id=principal.org_id,
        patch=body.patch(),
        actor=actor,
        client=client_address(request),
    )
    return SuccessOut(success=True)
