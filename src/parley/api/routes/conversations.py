"""Conversations (API.md section 5)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from parley.api.convert import conversation_out
from parley.api.deps import (
    AnyPrincipal,
    ApiKeyPrincipal,
    ConversationId,
    ConversationManager,
    Credential,
    Ctx,
    CursorParam,
    LimitParam,
    ProjectParam,
    actor_of,
)
from parley.api.schemas import (
    ConversationCreate,
    ConversationEnvelope,
    ConversationList,
    SuccessOut,
    error_responses,
)
from parley.services import conversation_read, conversations
from parley.text import Label

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


@router.get("", response_model=ConversationList, responses=error_responses(400, 401, 403, 404, 503))
async def list_conversations(
    ctx: Ctx,
    principal: AnyPrincipal,
    project: ProjectParam = None,
    agent: Annotated[Label | None, Query(description="Agent name or ID.")] = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> ConversationList:
    """List conversations, oldest first (a restricted session token sees only its own)."""
    page = await conversations.list_conversations(
        ctx,
        org_id=principal.org_id,
        project=project,
        agent=agent,
        only_ids=principal.conversation_ids,
        cursor=cursor,
        limit=limit,
    )
    return ConversationList(
        conversations=[conversation_out(c) for c in page.items], next_cursor=page.next_cursor
    )


@router.post(
    "/{id}/end",
    response_model=SuccessOut,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def end_conversation(
    request: Request, ctx: Ctx, principal: ConversationManager, conversation_id: ConversationId
) -> SuccessOut:
    """End a conversation (API key, or its own JWT); its live WebSocket closes with 1000."""
    await conversations.end_conversation(
        ctx,
        org_id=principal.org_id,
        conversation_id=conversation_id,
        actor=actor_of(request, principal),
    )
    return SuccessOut(success=True)


@router.get(
    "/{id}",
    response_model=ConversationEnvelope,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def get_conversation(
    ctx: Ctx, credential: Credential, conversation_id: ConversationId
) -> ConversationEnvelope:
    """Return a conversation and its items (API key, session token, or its own JWT)."""
    _principal, conversation = await conversation_read.read_conversation(
        ctx, credential, conversation_id
    )
    return ConversationEnvelope(conversation=conversation_out(conversation))
