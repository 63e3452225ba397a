"""API keys (API.md sections 2 and 17)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.schemas import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyList,
    ApiKeyOut,
    ApiKeyRotate,
    ApiKeyRotated,
    ApiKeyUpdate,
    SuccessOut,
    error_responses,
)
from parley.services import api_keys
from parley.text import Label

router = APIRouter(prefix="/v1/api_keys", tags=["api keys"])


@router.get("", response_model=ApiKeyList, responses=error_responses(400, 401, 403, 503))
async def list_api_keys(
    ctx: Ctx, principal: ApiKeyPrincipal, cursor: CursorParam = None, limit: LimitParam = 100
) -> ApiKeyList:
    """List the organization's active keys (prefix and last 4 characters only)."""
    page = await api_keys.list_api_keys(ctx, org_id=principal.org_id, cursor=cursor, limit=limit)
    return ApiKeyList(api_keys=[ApiKeyOut.of(k) for k in page.items], next_cursor=page.next_cursor)


@router.post(
    "",
    status_code=201,
    response_model=ApiKeyCreated,
    responses=error_responses(400, 401, 403, 413, 503),
)
async def create_api_key(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: Annotated[ApiKeyCreate | None, Body()] = None,
) -> ApiKeyCreated:
    """Create a key; its secret is in this answer and nowhere else, ever."""
    name = body.name if body is not None else None
    issued = await api_keys.create_api_key(ctx, org_id=principal.org_id, name=name, actor=actor)
    return ApiKeyCreated.of(issued.api_key, issued.secret)


@router.patch(
    "/{id}", response_model=SuccessOut, responses=error_responses(400, 401, 403, 404, 413, 503)
)
async def update_api_key(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    key_id: Annotated[Label, Path(alias="id")],
    body: ApiKeyUpdate,
) -> SuccessOut:
    """Rename a key."""
    await api_keys.rename_api_key(
        ctx, org_id=principal.org_id, key_id=key_id, name=body.name, actor=actor
    )
    return SuccessOut(success=True)


@router.post(
    "/{id}/rotate",
    response_model=ApiKeyRotated,
    responses=error_responses(400, 401, 403, 404, 413, 503),
)
async def rotate_api_key(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    key_id: Annotated[Label, Path(alias="id")],
    body: Annotated[ApiKeyRotate | None, Body()] = None,
) -> ApiKeyRotated:
    """Give a key a new secret, shown once; the old one stops now, or after `grace_seconds`."""
    grace = body.grace_seconds if body is not None else 0
    issued = await api_keys.rotate_api_key(
        ctx, org_id=principal.org_id, key_id=key_id, grace_seconds=grace, actor=actor
    )
    return ApiKeyRotated(id=issued.api_key.id, name=issued.api_key.name, api_key=issued.secret)


@router.delete("/{id}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 503))
async def delete_api_key(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    key_id: Annotated[Label, Path(alias="id")],
) -> SuccessOut:
    """Revoke a key: it stops working on the next request, on every instance."""
    await api_keys.revoke_api_key(ctx, org_id=principal.org_id, key_id=key_id, actor=actor)
    return SuccessOut(success=True)
