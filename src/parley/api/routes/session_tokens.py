"""Session tokens (spec section 4.2; API.md section 6)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx
from parley.api.schemas import SessionTokenCreate, SessionTokenCreated, SuccessOut, error_responses
from parley.clock import isoformat
from parley.services import session_tokens
from parley.text import Label

router = APIRouter(prefix="/v1/auth/session_token", tags=["session tokens"])


@router.post(
    "", response_model=SessionTokenCreated, responses=error_responses(400, 401, 403, 413, 503)
)
async def create_session_token(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    body: Annotated[SessionTokenCreate | None, Body()] = None,
) -> SessionTokenCreated:
    """Issue a session token, from the customer's backend, when a user starts a conversation."""
    request = body or SessionTokenCreate()
    issued = await session_tokens.create_session_token(
        ctx,
        org_id=principal.org_id,
        ttl_seconds=request.ttl_seconds,
        conversation_ids=request.conversation_ids,
        actor=actor,
    )
    return SessionTokenCreated(
        id=issued.token.id,
        session_token=issued.secret,
        expires_at=isoformat(issued.token.expires_at),
    )


@router.delete("/{id}", response_model=SuccessOut, responses=error_responses(401, 403, 404, 503))
async def revoke_session_token(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    token_id: Annotated[Label, Path(alias="id")],
) -> SuccessOut:
    """Revoke a session token: refused on its next use; its live WebSockets close (1008)."""
    await session_tokens.revoke_session_token(
        ctx, org_id=principal.org_id, token_id=token_id, actor=actor
    )
    return SuccessOut(success=True)
