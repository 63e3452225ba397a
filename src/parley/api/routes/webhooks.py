"""Webhooks (API.md section 14): endpoints that receive the organization's events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx, CursorParam, LimitParam
from parley.api.schemas import SuccessOut, error_responses
from parley.api.webhook_schemas import (
    DeliveryEnvelope,
    DeliveryList,
    DeliveryOut,
    SecretOut,
    WebhookCreate,
    WebhookCreated,
    WebhookEnvelope,
    WebhookList,
    WebhookOut,
    WebhookUpdate,
)
from parley.errors import ValidationFailed
from parley.services import webhooks
from parley.text import Label

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
WebhookId = Annotated[Label, Path(alias="id", description="The webhook's ID (`wh_…`).")]
MsgId = Annotated[Label, Path(alias="msg_id", description="The delivery's ID (`msg_…`).")]
ONE_WEBHOOK_ERRORS = error_responses(401, 403, 404, 503)


@router.post(
    "",
    status_code=201,
    response_model=WebhookCreated,
    responses=error_responses(400, 401, 403, 413, 503),
)
async def create_webhook(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, body: WebhookCreate
) -> WebhookCreated:
    """Create a webhook; the answer holds its secret, shown this once."""
    issued = await webhooks.create_webhook(
        ctx,
        org_id=principal.org_id,
        url=body.url,
        event_types=body.event_types,
        description=body.description,
        actor=actor,
    )
    return WebhookCreated(webhook=WebhookOut.of(issued.webhook), secret=issued.secret)


@router.get("", response_model=WebhookList, responses=error_responses(401, 403, 503))
async def list_webhooks(ctx: Ctx, principal: ApiKeyPrincipal) -> WebhookList:
    """List the organization's webhooks."""
    found = await webhooks.list_webhooks(ctx, org_id=principal.org_id)
    return WebhookList(webhooks=[WebhookOut.of(webhook) for webhook in found])


@router.get("/{id}", response_model=WebhookEnvelope, responses=ONE_WEBHOOK_ERRORS)
async def get_webhook(
    ctx: Ctx, principal: ApiKeyPrincipal, webhook_id: WebhookId
) -> WebhookEnvelope:
    """Return one webhook (never its secret)."""
    webhook = await webhooks.get_webhook(ctx, org_id=principal.org_id, webhook_id=webhook_id)
    return WebhookEnvelope(webhook=WebhookOut.of(webhook))


@router.patch(
    "/{id}", response_model=WebhookEnvelope, responses=error_responses(400, 401, 403, 404, 413, 503)
)
async def update_webhook(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    actor: ApiKeyActor,
    webhook_id: WebhookId,
    body: WebhookUpdate,
) -> WebhookEnvelope:
    """Update some fields; `is_disabled: false` re-enables a disabled webhook."""
    if nulls := body.null_fields():
        raise ValidationFailed(param_errors=dict.fromkeys(nulls, "may not be null"))
    webhook = await webhooks.update_webhook(
        ctx, org_id=principal.org_id, webhook_id=webhook_id, patch=body.patch(), actor=actor
    )
    return WebhookEnvelope(webhook=WebhookOut.of(webhook))


@router.delete("/{id}", response_model=SuccessOut, responses=ONE_WEBHOOK_ERRORS)
async def delete_webhook(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, webhook_id: WebhookId
) -> SuccessOut:
    """Delete a webhook and its deliveries."""
    await webhooks.delete_webhook(ctx, org_id=principal.org_id, webhook_id=webhook_id, actor=actor)
    return SuccessOut(success=True)


@router.post("/{id}/rotate_secret", response_model=SecretOut, responses=ONE_WEBHOOK_ERRORS)
async def rotate_secret(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, webhook_id: WebhookId
) -> SecretOut:
    """Give the webhook a new secret; the previous one keeps signing for 24 h."""
    secret = await webhooks.rotate_secret(
        ctx, org_id=principal.org_id, webhook_id=webhook_id, actor=actor
    )
    return SecretOut(secret=secret)


@router.get(
    "/{id}/deliveries",
    response_model=DeliveryList,
    responses=error_responses(400, 401, 403, 404, 503),
)
async def list_deliveries(
    ctx: Ctx,
    principal: ApiKeyPrincipal,
    webhook_id: WebhookId,
    cursor: CursorParam = None,
    limit: LimitParam = 100,
) -> DeliveryList:
    """List the webhook's deliveries, newest first."""
    page = await webhooks.list_deliveries(
        ctx, org_id=principal.org_id, webhook_id=webhook_id, cursor=cursor, limit=limit
    )
    return DeliveryList(
        deliveries=[DeliveryOut.of(delivery) for delivery in page.items],
        next_cursor=page.next_cursor,
    )


@router.post(
    "/{id}/deliveries/{msg_id}/retry", response_model=DeliveryEnvelope, responses=ONE_WEBHOOK_ERRORS
)
async def retry_delivery(
    ctx: Ctx, principal: ApiKeyPrincipal, webhook_id: WebhookId, msg_id: MsgId
) -> DeliveryEnvelope:
    """Send a delivery again now (a failed one gets one more attempt)."""
    delivery = await webhooks.retry_delivery(
        ctx, org_id=principal.org_id, webhook_id=webhook_id, msg_id=msg_id
    )
    return DeliveryEnvelope(delivery=DeliveryOut.of(delivery))
