"""Conversations (API.md section 5)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import FileResponse

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
    Speech,
    actor_of,
    client_address,
)
from parley.api.replay_schemas import ConversationReplayIn, ConversationReplayOut
from parley.api.replays import start_replay
from parley.api.schemas import (
    ConversationCreate,
    ConversationEnvelope,
    ConversationList,
    PaginationOut,
    SuccessOut,
    error_responses,
)
from parley.api.telephony_schemas import OutboundCallIn, OutboundCallOut
from parley.services import (
    conversation_list,
    conversation_read,
    conversation_replays,
    conversations,
    outbound_calls,
    recordings,
    retention,
)
from parley.services.conversation_list import ListQuery
from parley.text import Label

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

MAX_SECONDS = 10**9
SECONDS = "In seconds, of an ended conversation (inclusive)."
MOMENT = "An ISO 8601 date (a whole UTC day) or date and time with `Z` or an offset."
BEFORE = "A conversation ID (`pagination.prev_cursor`): the page before it."
AFTER = "A conversation ID (`pagination.next_cursor`): the page after it."
AudioContainer = Annotated[
    Literal["wav"] | None,
    Query(
        alias="audio_container",
        description="The recording's container: `wav` (the only one Parley makes).",
    ),
]


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


@router.post(
    "/outbound_call",
    response_model=OutboundCallOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 429, 502, 503),
)
async def outbound_call(
    request: Request, ctx: Ctx, principal: ApiKeyPrincipal, speech: Speech, body: OutboundCallIn
) -> OutboundCallOut:
    """Call a number with an agent (API.md section 15): a `pending` conversation that the
    callee's answer starts. `dry_run`: the checks only."""
    placed = await outbound_calls.place_call(
        ctx,
        org_id=principal.org_id,
        request=body.request(),
        actor=actor_of(request, principal),
        speech=speech,
    )
    return OutboundCallOut(conversation_id=placed, dry_run=body.dry_run)


@router.get("", response_model=ConversationList, responses=error_responses(400, 401, 403, 404, 503))
async def list_conversations(
    ctx: Ctx,
    principal: AnyPrincipal,
    project: ProjectParam = None,
    agent: Annotated[Label | None, Query(description="Agent name or ID.")] = None,
    external_id: Annotated[Label | None, Query(max_length=256)] = None,
    duration_min: Annotated[int | None, Query(ge=0, le=MAX_SECONDS, description=SECONDS)] = None,
    duration_max: Annotated[int | None, Query(ge=0, le=MAX_SECONDS, description=SECONDS)] = None,
    started_at_min: Annotated[str | None, Query(max_length=40, description=MOMENT)] = None,
    started_at_max: Annotated[str | None, Query(max_length=40, description=MOMENT)] = None,
    before: Annotated[Label | None, Query(max_length=128, description=BEFORE)] = None,
    after: Annotated[Label | None, Query(max_length=128, description=AFTER)] = None,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
    _audio_container: AudioContainer = None,
) -> ConversationList:
    """List conversations, oldest first (a restricted session token sees only its own),
    with the official SDK's filters and cursors (API.md section 17)."""
    query = ListQuery(
        project=project,
        agent=agent,
        external_id=external_id,
        duration_min=duration_min,
        duration_max=duration_max,
        started_at_min=started_at_min,
        started_at_max=started_at_max,
        before=before,
        after=after,
        cursor=cursor,
        limit=limit,
    )
    page = await conversation_list.list_conversations(
        ctx, org_id=principal.org_id, query=query, only_ids=principal.conversation_ids
    )
    return ConversationList(
        conversations=[conversation_out(c) for c in page.items],
        next_cursor=page.next_cursor,
        pagination=PaginationOut(prev_cursor=page.prev_id, next_cursor=page.next_id),
    )


@router.post(
    "/{id}/replay",
    response_model=ConversationReplayOut,
    responses=error_responses(400, 401, 403, 404, 409, 413, 429, 503),
)
async def replay_conversation(
    request: Request,
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    conversation_id: ConversationId,
    body: Annotated[ConversationReplayIn | None, Body()] = None,
) -> ConversationReplayOut:
    """Play an ended conversation's recorded user channel, at real-time pace, into a new
    conversation with an agent (default: the same), in the background (API.md section 17)."""
    plan = await conversation_replays.prepare_replay(
        ctx,
        org_id=principal.org_id,
        conversation_id=conversation_id,
        agent=body.agent if body else None,
    )
    start_replay(ctx, request.app.state.engine_factory, principal, plan)
    return ConversationReplayOut(
        conversation_id=plan.conversation_id,
        message=f"Replay of {conversation_id} started as conversation {plan.conversation_id}.",
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


@router.post(
    "/{id}/cancel",
    response_model=SuccessOut,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def cancel_conversation(
    request: Request, ctx: Ctx, principal: ApiKeyPrincipal, conversation_id: ConversationId
) -> SuccessOut:
    """End a conversation as `…/end` does and hang up its phone call, ringing or live."""
    await outbound_calls.cancel_call(
        ctx,
        org_id=principal.org_id,
        conversation_id=conversation_id,
        actor=actor_of(request, principal),
    )
    return SuccessOut(success=True)


@router.delete(
    "/{id}",
    response_model=SuccessOut,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def delete_conversation(
    request: Request, ctx: Ctx, principal: ApiKeyPrincipal, conversation_id: ConversationId
) -> SuccessOut:
    """Delete an ended conversation's transcript and recording now (API.md section 16); the
    record stays, with `deletion_info`. 409 `conversation_live` before it has ended."""
    await retention.delete_conversation(
        ctx,
        org_id=principal.org_id,
        conversation_id=conversation_id,
        actor=actor_of(request, principal),
    )
    return SuccessOut(success=True)


@router.get(
    "/{id}/audio",
    response_class=FileResponse,
    responses={
        200: {"content": {"audio/wav": {}}, "description": "The recording (byte ranges: 206)."},
        **error_responses(403, 404, 503),
    },
)
async def conversation_audio(
    ctx: Ctx,
    conversation_id: ConversationId,
    expires: Annotated[str | None, Query(max_length=20)] = None,
    signature: Annotated[str | None, Query(max_length=100)] = None,
) -> FileResponse:
    """The conversation's recording, by the signed URL of its `audio_url` (API.md section
    16): no credential; a wrong, missing or expired signature is 403 `invalid_signature`."""
    stored = await recordings.open_audio(ctx, conversation_id, expires=expires, signature=signature)
    return FileResponse(
        stored.path,
        media_type="audio/wav",
        filename=f"{conversation_id}.wav",
        content_disposition_type="inline",
    )


@router.get(
    "/{id}",
    response_model=ConversationEnvelope,
    responses=error_responses(401, 403, 404, 409, 429, 503),
)
async def get_conversation(
    request: Request,
    ctx: Ctx,
    credential: Credential,
    conversation_id: ConversationId,
    _audio_container: AudioContainer = None,
) -> ConversationEnvelope:
    """Return a conversation and its items (API key, session token, or its own JWT)."""
    _principal, conversation = await conversation_read.read_conversation(
        ctx, credential, conversation_id, client=client_address(request)
    )
    return ConversationEnvelope(conversation=conversation_out(conversation))
