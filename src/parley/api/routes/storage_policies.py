"""External storage policies (API.md section 16): where agents' recordings go."""

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
from parley.api.storage_policy_schemas import (
    StoragePolicyCreate,
    StoragePolicyCreated,
    StoragePolicyEnvelope,
    StoragePolicyList,
    StoragePolicyOut,
    StoragePolicyUpdate,
)
from parley.errors import ValidationFailed
from parley.services import storage_policies
from parley.text import Label

router = APIRouter(prefix="/v1/external_storage_policies", tags=["external storage policies"])
NameOrId = Annotated[
    Label, Path(alias="nameOrId", description="Name or ID of the external storage policy.")
]


@router.get(
    "", response_model=StoragePolicyList, responses=error_responses(400, 401, 403, 404, 503)
)
async def list_policies(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    project: ProjectParam = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> StoragePolicyList:
    """List the organization's external storage policies (in one project when given)."""
    page = await storage_policies.list_policies(
        ctx, org_id=principal.org_id, project=project, cursor=cursor, limit=limit
    )
    return StoragePolicyList(
        external_storage_policies=[StoragePolicyOut.of(p) for p in page.items],
        next_cursor=page.next_cursor,
    )


@router.post(
    "",
    response_model=StoragePolicyCreated,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_policy(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: StoragePolicyCreate,
    project: ProjectParam = None,
) -> StoragePolicyCreated:
    """Create an external storage policy (200, as the official SDK has it); its
    credentials are stored encrypted and never returned."""
    if body.project and project and body.project != project:
        raise ValidationFailed(param_errors={"project": "differs from the ?project= parameter"})
    policy = await storage_policies.create_policy(
        ctx, org_id=principal.org_id, project=body.project or project, spec=body.spec(), actor=actor
    )
    return StoragePolicyCreated(id=policy.id, name=policy.name)


@router.get(
    "/{nameOrId}",
    response_model=StoragePolicyEnvelope,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def get_policy(
    ctx: Ctx, principal: ApiKeyPrincipal, name_or_id: NameOrId, project: ProjectParam = None
) -> StoragePolicyEnvelope:
    """Return one external storage policy (never its credentials)."""
    policy = await storage_policies.get_policy(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project
    )
    return StoragePolicyEnvelope(external_storage_policy=StoragePolicyOut.of(policy))


@router.patch(
    "/{nameOrId}",
    response_model=SuccessOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def update_policy(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    body: StoragePolicyUpdate,
    project: ProjectParam = None,
) -> SuccessOut:
    """Update some fields of a policy; the result is checked as a whole policy."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    await storage_policies.update_policy(
        ctx,
        org_id=principal.org_id,
        ref=name_or_id,
        project=project,
        patch=body.patch(),
        actor=actor,
    )
    return SuccessOut(success=True)


@router.delete(
    "/{nameOrId}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 409, 503)
)
async def delete_policy(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    name_or_id: NameOrId,
    project: ProjectParam = None,
) -> SuccessOut:
    """Delete a policy; 409 `policy_in_use` while an agent names it."""
    await storage_policies.delete_policy(
        ctx, org_id=principal.org_id, ref=name_or_id, project=project, actor=actor
    )
    return SuccessOut(success=True)
