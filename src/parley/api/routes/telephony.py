"""Phone calls (API.md section 13): the carrier account and the carrier's voice webhook.

The voice webhook takes no bearer credential: its `X-Twilio-Signature` is its credential,
checked by services/telephony.py. Its body is parsed here, strictly, so that a malformed one
is a 400 (never a framework 422, nor the API key check the JSON routes run first).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response

from parley.api import twiml
from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx
from parley.api.schemas import SuccessOut, error_responses
from parley.api.telephony_schemas import TwilioAccountOut, TwilioAccountPut
from parley.errors import InvalidRequest, PayloadTooLarge
from parley.services import telephony

router = APIRouter(prefix="/v1/telephony/twilio", tags=["telephony"])

MAX_WEBHOOK_BYTES = 64 * 1024
"""A voice webhook is about 1 KiB of form fields; anything near this is not the carrier's."""
MAX_WEBHOOK_FIELDS = 100
FORM_TYPE = "application/x-www-form-urlencoded"


@router.put(
    "", response_model=TwilioAccountOut, responses=error_responses(400, 401, 403, 409, 413, 503)
)
async def put_twilio_account(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor, body: TwilioAccountPut
) -> TwilioAccountOut:
    """Set the organization's Twilio account; the auth token is stored encrypted."""
    account = await telephony.put_twilio_account(
        ctx,
        org_id=principal.org_id,
        account_sid=body.account_sid,
        auth_token=body.auth_token,
        actor=actor,
    )
    return TwilioAccountOut.of(account, voice_url=telephony.voice_url(ctx))


@router.get("", response_model=TwilioAccountOut, responses=error_responses(401, 403, 404, 503))
async def get_twilio_account(ctx: Ctx, principal: ApiKeyPrincipal) -> TwilioAccountOut:
    """Show the organization's Twilio account (never its auth token)."""
    account = await telephony.get_twilio_account(ctx, org_id=principal.org_id)
    return TwilioAccountOut.of(account, voice_url=telephony.voice_url(ctx))


@router.delete("", response_model=SuccessOut, responses=error_responses(401, 403, 404, 503))
async def delete_twilio_account(
    ctx: Ctx, principal: ApiKeyPrincipal, actor: ApiKeyActor
) -> SuccessOut:
    """Forget the organization's Twilio account: its numbers' calls are refused from now."""
    await telephony.delete_twilio_account(ctx, org_id=principal.org_id, actor=actor)
    return SuccessOut(success=True)


@router.post(
    "/voice",
    response_class=Response,
    responses={
        200: {"content": {twiml.MEDIA_TYPE: {}}, "description": "TwiML: connect or reject."},
        **error_responses(400, 403, 413, 503),
    },
)
async def voice_webhook(request: Request, ctx: Ctx) -> Response:
    """The carrier's voice webhook (signed with `X-Twilio-Signature`); answers TwiML."""
    params = await _form_fields(request)
    answer = await telephony.answer_call(
        ctx,
        query=request.scope.get("query_string", b"").decode("latin-1"),
        params=params,
        signature=request.headers.get("x-twilio-signature"),
    )
    if answer.rejected or answer.stream_token is None or answer.conversation_id is None:
        return Response(twiml.reject_busy(), media_type=twiml.MEDIA_TYPE)
    document = twiml.connect_stream(
        telephony.media_url(ctx),
        [("conversation_id", answer.conversation_id), ("stream_token", answer.stream_token)],
    )
    return Response(document, media_type=twiml.MEDIA_TYPE)


async def _form_fields(request: Request) -> list[tuple[str, str]]:
    """The form's fields in the order sent: UTF-8, `application/x-www-form-urlencoded`."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != FORM_TYPE:
        raise InvalidRequest(f"The body must be {FORM_TYPE}.")
    body = await request.body()
    if len(body) > MAX_WEBHOOK_BYTES:
        raise PayloadTooLarge("The webhook body is larger than 64 KiB.")
    try:
        return parse_qsl(
            body.decode("ascii"),
            keep_blank_values=True,
            strict_parsing=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_WEBHOOK_FIELDS,
        )
    except ValueError:  # UnicodeDecodeError included
        raise InvalidRequest("The body is not a well-formed form.") from None
