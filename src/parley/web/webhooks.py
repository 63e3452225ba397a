"""Dashboard pages of webhooks (API.md section 14): list, create (the secret shown once),
edit, rotate the secret (the new one shown once), delete; a webhook's deliveries, paged,
with "Send again" on each failed one.

Another organization's webhook is the service's 404 `webhook_not_found`, shown as a page
of its own, and nothing of it is shown.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from parley.error_status import status_for
from parley.ids import looks_like_id
from parley.records import Webhook
from parley.services import webhooks
from parley.services.events import EVENT_TYPES
from parley.web import webhook_forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
DELIVERIES_PER_PAGE: Final = 50
LIST_PATH: Final = "/dashboard/webhooks"


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


async def _webhooks_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    listed = await webhooks.list_webhooks(context_of(request), org_id=signed_in.org_id)
    return await page(
        request,
        signed_in,
        "webhooks.html",
        status=status,
        webhooks=listed,
        event_types=EVENT_TYPES,
        notice=notice(request),
        **extra,
    )


async def _webhook_page(
    request: Request,
    signed_in: Visitor,
    webhook: Webhook,
    *,
    cursor: str | None = None,
    status: int = 200,
    **extra: Any,
) -> Response:
    deliveries = await webhooks.list_deliveries(
        context_of(request),
        org_id=signed_in.org_id,
        webhook_id=webhook.id,
        cursor=cursor,
        limit=DELIVERIES_PER_PAGE,
    )
    return await page(
        request,
        signed_in,
        "webhook.html",
        status=status,
        webhook=webhook,
        deliveries=deliveries,
        event_types=EVENT_TYPES,
        notice=notice(request),
        retried=_retried(request),
        **extra,
    )


def _retried(request: Request) -> str | None:
    """The delivery a "Send again" just retried, named by the redirect (if it is an ID)."""
    msg_id = request.query_params.get("retried", "")
    return msg_id if looks_like_id(msg_id, "msg") else None


@router.get("/webhooks")
async def webhooks_page(request: Request, signed_in: SignedIn) -> Response:
    return await _webhooks_page(request, signed_in)


@router.post("/webhooks")
async def create_webhook(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        issued = await webhooks.create_webhook(
            context_of(request),
            org_id=signed_in.org_id,
            url=webhook_forms.url(form),
            event_types=webhook_forms.event_types(form),
            description=webhook_forms.description(form),
            actor=signed_in.actor,
        )
    except FORM_ERRORS as error:
        failed = FailedForm.of("create-webhook", form, error)
        return await _webhooks_page(request, signed_in, status=status_for(error), failed=failed)
    # The one answer that shows the secret: rendered, never redirected to, so no later page
    # (nor a reload of a later one) can show it again.
    return await _webhooks_page(request, signed_in, created=issued)


@router.get("/webhooks/{webhook_id}")
async def webhook_page(
    request: Request, signed_in: SignedIn, webhook_id: str, cursor: str | None = None
) -> Response:
    webhook = await webhooks.get_webhook(
        context_of(request), org_id=signed_in.org_id, webhook_id=webhook_id
    )
    return await _webhook_page(request, signed_in, webhook, cursor=cursor)


@router.post("/webhooks/{webhook_id}")
async def update_webhook(
    request: Request, signed_in: SignedIn, form: CheckedForm, webhook_id: str
) -> Response:
    ctx = context_of(request)
    current = await webhooks.get_webhook(ctx, org_id=signed_in.org_id, webhook_id=webhook_id)
    try:
        await webhooks.update_webhook(
            ctx, org_id=signed_in.org_id, webhook_id=current.id,
            patch=webhook_forms.webhook_patch(form, current), actor=signed_in.actor,
        )  # fmt: skip
    except FORM_ERRORS as error:
        failed = FailedForm.of("edit-webhook", form, error)
        return await _webhook_page(
            request, signed_in, current, status=status_for(error), failed=failed
        )
    return done(f"{LIST_PATH}/{current.id}", "webhook_updated")


@router.post("/webhooks/{webhook_id}/rotate")
async def rotate_secret(
    request: Request, signed_in: SignedIn, _form: CheckedForm, webhook_id: str
) -> Response:
    ctx = context_of(request)
    secret = await webhooks.rotate_secret(
        ctx, org_id=signed_in.org_id, webhook_id=webhook_id, actor=signed_in.actor
    )
    webhook = await webhooks.get_webhook(ctx, org_id=signed_in.org_id, webhook_id=webhook_id)
    # Shown this once, like a new webhook's secret: rendered, not redirected to.
    return await _webhook_page(request, signed_in, webhook, rotated=secret)


@router.post("/webhooks/{webhook_id}/delete")
async def delete_webhook(
    request: Request, signed_in: SignedIn, _form: CheckedForm, webhook_id: str
) -> Response:
    await webhooks.delete_webhook(
        context_of(request), org_id=signed_in.org_id, webhook_id=webhook_id, actor=signed_in.actor
    )
    return done(LIST_PATH, "webhook_deleted")


@router.post("/webhooks/{webhook_id}/deliveries/{msg_id}/retry")
async def retry_delivery(
    request: Request, signed_in: SignedIn, _form: CheckedForm, webhook_id: str, msg_id: str
) -> Response:
    retried = await webhooks.retry_delivery(
        context_of(request), org_id=signed_in.org_id, webhook_id=webhook_id, msg_id=msg_id
    )
    # Post-redirect-get: the webhook's page shows the notice and marks the delivery's row,
    # whose status then tells how the new attempt went.
    query = urlencode({"done": "delivery_retried", "retried": retried.id})
    return RedirectResponse(f"{LIST_PATH}/{retried.webhook_id}?{query}", status_code=303)
