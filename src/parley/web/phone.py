"""The dashboard's phone page (API.md section 13): the Twilio account, the voice URL to
paste into the carrier's console, and the agents' phone numbers.

Rules:
1. The auth token is shown as its last 4 characters only; a refused form never types it
   back (it is a secret field), and no page renders it.
2. Without an account the page says so and offers the form; deleting a missing account is
   the service's 404 `telephony_not_configured`.
3. Each number is listed with the agent it reaches; a disabled agent's number refuses
   calls, and the page says that too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from parley.error_status import status_for
from parley.errors import TelephonyNotConfigured
from parley.records import Agent, TwilioAccount
from parley.services import agents, telephony
from parley.services.context import Context
from parley.web import forms
from parley.web.form_state import FORM_ERRORS, FailedForm
from parley.web.render import PageRoute, done, notice, page
from parley.web.session import Visitor, checked_form, context_of, visitor
from parley.web.tools import every

router = APIRouter(prefix="/dashboard", route_class=PageRoute, include_in_schema=False)
SignedIn = Annotated[Visitor, Depends(visitor)]
SECRET_FIELDS: Final = ("auth_token",)
"""Fields a refused form leaves empty (rule 1)."""
PATH: Final = "/dashboard/phone"


async def _form(request: Request, signed_in: SignedIn) -> FormData:
    return await checked_form(request, signed_in)


CheckedForm = Annotated[FormData, Depends(_form)]


@dataclass(frozen=True, slots=True)
class PhoneNumber:
    """One number and the agent a call to it reaches (rule 3)."""

    number: str
    agent: Agent


async def phone_numbers(ctx: Context, org_id: str) -> list[PhoneNumber]:
    """Every phone number of the organization's agents, sorted by number."""
    found = await every(
        lambda cursor: agents.list_agents(
            ctx, org_id=org_id, project=None, cursor=cursor, limit=100
        )
    )
    numbers = [PhoneNumber(number, agent) for agent in found for number in agent.phone_numbers]
    return sorted(numbers, key=lambda n: n.number)


async def twilio_account(ctx: Context, org_id: str) -> TwilioAccount | None:
    """The organization's Twilio account, or None when none is set (rule 2)."""
    try:
        return await telephony.get_twilio_account(ctx, org_id=org_id)
    except TelephonyNotConfigured:
        return None


async def _phone_page(
    request: Request, signed_in: Visitor, *, status: int = 200, **extra: Any
) -> Response:
    ctx = context_of(request)
    return await page(
        request,
        signed_in,
        "phone.html",
        status=status,
        account=await twilio_account(ctx, signed_in.org_id),
        voice_url=telephony.voice_url(ctx),
        numbers=await phone_numbers(ctx, signed_in.org_id),
        notice=notice(request),
        **extra,
    )


@router.get("/phone")
async def phone_page(request: Request, signed_in: SignedIn) -> Response:
    return await _phone_page(request, signed_in)


@router.post("/phone")
async def put_account(request: Request, signed_in: SignedIn, form: CheckedForm) -> Response:
    try:
        await telephony.put_twilio_account(
            context_of(request),
            org_id=signed_in.org_id,
            account_sid=forms.text(form, "account_sid", max_length=64, required=True),
            auth_token=forms.text(form, "auth_token", max_length=64, required=True),
            actor=signed_in.actor,
        )
    except FORM_ERRORS as error:  # a malformed SID or token, or a SID taken (409)
        failed = FailedForm.of("twilio-account", form, error, secret_fields=SECRET_FIELDS)
        return await _phone_page(request, signed_in, status=status_for(error), failed=failed)
    return done(PATH, "phone_saved")


@router.post("/phone/delete")
async def delete_account(request: Request, signed_in: SignedIn, _form: CheckedForm) -> Response:
    await telephony.delete_twilio_account(
        context_of(request), org_id=signed_in.org_id, actor=signed_in.actor
    )
    return done(PATH, "phone_deleted")
