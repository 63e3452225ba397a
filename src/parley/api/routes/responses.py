"""What the assistant would say (API.md section 17): `conversation_items.replay` and
`responses.create`; nothing is stored and no tool is run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path

from parley.api.deps import ApiKeyPrincipal, Ctx
from parley.api.replay_schemas import ItemReplayIn, ItemReplayOut, ResponsesCreate, ResponsesOut
from parley.api.schemas import error_responses
from parley.services import alternatives, responses
from parley.text import Label

router = APIRouter(tags=["responses"])
ItemId = Annotated[Label, Path(alias="id", description="The item's ID (`item_…`).")]
ASKS_THE_MODEL = error_responses(400, 401, 403, 404, 409, 413, 502, 503)


@router.post(
    "/v1/conversation_items/{id}/replay", response_model=ItemReplayOut, responses=ASKS_THE_MODEL
)
async def replay_conversation_item(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    item_id: ItemId,
    body: Annotated[ItemReplayIn | None, Body()] = None,
) -> ItemReplayOut:
    """Ask the language model again for an assistant item of an ended conversation, with
    the history before it: 409 `no_language_model` without one, 400 for a user's item."""
    given = body or ItemReplayIn()
    found = await alternatives.replay_item(
        ctx,
        org_id=principal.org_id,
        item_id=item_id,
        system_prompt=given.system_prompt,
        num_responses=given.num_responses or 1,
    )
    return ItemReplayOut.of(found)


@router.post("/v1/responses", response_model=ResponsesOut, responses=ASKS_THE_MODEL)
async def create_responses(
    ctx: Ctx, principal: ApiKeyPrincipal, body: ResponsesCreate
) -> ResponsesOut:
    """The responses an assistant would give after the conversation in the body (the
    SDK's `responses.create`): stateless, no tool run."""
    found = await responses.create_responses(ctx, org_id=principal.org_id, request=body.request())
    return ResponsesOut.of(found)
