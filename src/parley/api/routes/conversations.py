"""Conversations (API.md section 5)."""

from __future__ import annotations

from fastapi import APIRouter

from parley.api.convert import conversation_out
from parley.api.deps import ApiKeyPrincipal, ConversationId, ConversationPrincipal, Ctx
from parley.api.schemas import ConversationCreate, ConversationEnvelope, error_responses
from parley.errors import InsufficientScope
from parley.services import conversations

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.post(
    "",
    status_code=201,
    response_model=ConversationEnvelope,
    responses=error_responses(400, 401, 403, 404, 409, 413, 503),
)
async def create_conversation(
    ctx: Ctx, principal: ApiKeyPrincipal, body: ConversationCreate
) -> ConversationEnvelope:
    """Create a `pending` conversation with an agent (409 `agent_disabled` if disabled)."""
    conversation = await conversations.create_conversation(
        ctx,
        org_id=principal.org_id,
        agent=body.agent,
        project=body.project,
        conversation_id=body.id,
    )
    return ConversationEnvelope(conversation=conversation_out(conversation))


@router.get(
    "/{id}",
    response_model=ConversationEnvelope,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def get_conversation(
    ctx: Ctx, principal: ConversationPrincipal, conversation_id: ConversationId
) -> ConversationEnvelope:
    """Return a conversation and its items (API key, session token, or its own JWT)."""
    if not principal.may_access(conversation_id):
        raise InsufficientScope()
    conversation = await conversations.get_conversation(
        ctx, org_id=principal.org_id, conversation_id=conversation_id
    )
    return ConversationEnvelope(conversation=conversation_out(conversation))
