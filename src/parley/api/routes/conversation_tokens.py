"""Conversation tokens (API.md section 17)."""

from __future__ import annotations

from fastapi import APIRouter

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx
from parley.api.schemas import ConversationTokenCreate, ConversationTokenCreated, error_responses
from parley.clock import isoformat
from parley.services import conversation_tokens

router = APIRouter(prefix="/v1/auth/conversation_token", tags=["conversation tokens"])


@router.post(
    "",
    response_model=ConversationTokenCreated,
    responses=error_responses(400, 401, 403, 404, 413, 503),
)
async def create_conversation_token(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, body: ConversationTokenCreate
) -> ConversationTokenCreated:
    """Issue a single-use token that opens one conversation with one agent: for a browser
    (`?conversation_token=` on `/v1/sts/ws`)."""
    issued = await conversation_tokens.create_conversation_token(
        ctx,
        org_id=principal.org_id,
        agent_ref=body.agent_id,
        ttl_seconds=body.ttl_seconds,
        actor=actor,
    )
    return ConversationTokenCreated(
        conversation_token=issued.secret, expires_at=isoformat(issued.token.expires_at)
    )
