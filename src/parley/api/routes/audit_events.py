"""The audit trail of the organization: who changed what, newest first."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from parley.api.deps import ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.schemas import AuditEventList, AuditEventOut, error_responses
from parley.services import audit

router = APIRouter(prefix="/v1/audit_events", tags=["audit"])


@router.get("", response_model=AuditEventList, responses=error_responses(400, 401, 403, 503))
async def list_audit_events(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    action: Annotated[
        str | None, Query(max_length=64, description="Only this action, e.g. `agent.disable`.")
    ] = None,
    target: Annotated[
        str | None, Query(max_length=256, description="Only events about this ID.")
    ] = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> AuditEventList:
    """List the organization's audit events, newest first (API key only)."""
    page = await audit.list_events(
        ctx, org_id=principal.org_id, action=action, target=target, cursor=cursor, limit=limit
    )
    return AuditEventList(
        audit_events=[AuditEventOut.of(event) for event in page.items],
        next_cursor=page.next_cursor,
    )
