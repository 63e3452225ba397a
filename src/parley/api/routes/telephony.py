"""Phone calls (API.md section 13): the carrier account and the carrier's voice webhook.

The voice webhook takes no bearer credential: its `X-Twilio-Signature` is its credential,
proven by services/authn.py (`authenticate_carrier`) before services/telephony.py answers.
Its body is parsed here, strictly, so that a malformed one is a 400 (never a framework 422,
nor the API key check the JSON routes run first).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response

from parley.api.deps import ApiKeyActor, ApiKeyPrincipal, Ctx
from parley.api.schemas import SuccessOut, error_responses
from parley.api.telephony_schemas import TwilioAccountOut, TwilioAccountPut
from parley.engine import EngineFactory
from parley.errors import InvalidRequest, PayloadTooLarge
from parley.ids import is_valid_conversation_id
from parley.services import authn, outbound_calls, telephony, transfers

router = APIRouter(prefix="/v1/telephony/twilio", tags=["telephony"])

MAX_WEBHOOK_BYTES = 64 * 1024
"""A voice webhook is about 1 KiB of form fields; anything near this is not the carrier's."""
MAX_WEBHOOK_FIELDS = 100
BRIEFING_RATE = 8000
"""A phone line carries 8 kHz: the briefing is rendered at that rate."""
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
        200: {
            "content": {telephony.TWIML_MEDIA_TYPE: {}},
            "description": "TwiML: connect, reject or hang up.",
        },
        **error_responses(400, 403, 413, 503),
    },
)
async def voice_webhook(request: Request, ctx: Ctx) -> Response:
    """The carrier's voice webhook (signed with `X-Twilio-Signature`); answers TwiML. A call
    placed by the API names its conversation: `?conversation_id=`."""
    params, carrier = await _signed(request, ctx, telephony.VOICE_PATH)
    placed = _placed_conversation(request)
    if placed is not None:
        answer = await outbound_calls.answer_placed_call(
            ctx, org_id=carrier.org_id, conversation_id=placed, params=params
        )
    else:
        answer = await telephony.answer_call(ctx, org_id=carrier.org_id, params=params)
    document = telephony.voice_twiml(ctx, answer)
    return Response(document, media_type=telephony.TWIML_MEDIA_TYPE)


@router.post(
    "/status",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 403, 413, 503),
)
async def status_callback(request: Request, ctx: Ctx) -> Response:
    """A placed call's status callback (signed): a call that never connected ends with why,
    a completed one ends (API.md section 15). Idempotent."""
    params, carrier = await _signed(request, ctx, outbound_calls.STATUS_PATH)
    await outbound_calls.call_status(ctx, org_id=carrier.org_id, params=params)
    return Response(status_code=204)


@router.post(
    "/amd",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 403, 413, 503),
)
async def machine_detection_callback(request: Request, ctx: Ctx) -> Response:
    """A placed call's asynchronous machine-detection verdict (signed, `AnsweredBy`): a
    machine gets the voicemail message, then the call ends (API.md section 15)."""
    params, carrier = await _signed(request, ctx, outbound_calls.AMD_PATH)
    await outbound_calls.machine_verdict(ctx, org_id=carrier.org_id, params=params)
    return Response(status_code=204)


@router.post(
    "/transfer",
    status_code=204,
    response_class=Response,
    responses=error_responses(400, 403, 413, 503),
)
async def transfer_answered_callback(request: Request, ctx: Ctx) -> Response:
    """A transfer's target answered (the `<Number>`'s signed status callback): the
    conversation ends `transferred` (API.md section 15)."""
    _, carrier = await _signed(request, ctx, transfers.TRANSFER_STATUS_PATH)
    conversation_id = _required_conversation(request)
    await transfers.target_answered(ctx, org_id=carrier.org_id, conversation_id=conversation_id)
    return Response(status_code=204)


@router.post(
    "/dial",
    response_class=Response,
    responses={
        200: {
            "content": {telephony.TWIML_MEDIA_TYPE: {}},
            "description": "TwiML: hang up, dial again, or the caller back with the agent.",
        },
        **error_responses(400, 403, 413, 503),
    },
)
async def dial_action_callback(request: Request, ctx: Ctx) -> Response:
    """A transfer's `<Dial>` ended (its signed `action`): answered, or not, and then the
    caller comes back to the conversation (API.md section 15)."""
    params, carrier = await _signed(request, ctx, transfers.DIAL_PATH)
    conversation_id = _required_conversation(request)
    attempt = request.query_params.get("attempt", "")
    if not attempt.isdigit() or len(attempt) > 2:
        raise InvalidRequest("attempt is not a dial attempt.")
    document = await transfers.dial_ended(
        ctx,
        org_id=carrier.org_id,
        conversation_id=conversation_id,
        attempt=int(attempt),
        params=params,
    )
    return Response(document, media_type=telephony.TWIML_MEDIA_TYPE)


@router.post(
    "/briefing",
    response_class=Response,
    responses={
        200: {"content": {telephony.TWIML_MEDIA_TYPE: {}}, "description": "TwiML: `<Play>`."},
        **error_responses(400, 403, 413, 503),
    },
)
async def briefing_callback(request: Request, ctx: Ctx) -> Response:
    """A warm transfer's target answered: what it hears before the bridge (signed)."""
    await _signed(request, ctx, transfers.BRIEFING_PATH)
    _required_conversation(request)
    token = request.query_params.get("token", "")
    document = transfers.briefing(ctx, token=token)
    return Response(document, media_type=telephony.TWIML_MEDIA_TYPE)


@router.get(
    "/briefings/{token}.wav",
    response_class=Response,
    responses={
        200: {"content": {"audio/wav": {}}, "description": "The briefing, spoken."},
        **error_responses(404, 503),
    },
)
async def briefing_audio(request: Request, ctx: Ctx, token: str) -> Response:
    """A warm transfer's briefing as audio, at its single-use URL (the token is the
    credential: it works once, for 10 minutes)."""
    text, voice = await transfers.briefing_audio(ctx, token=token)
    factory: EngineFactory = request.app.state.engine_factory
    audio = await factory.speak_wav(text, voice_id=voice, sample_rate=BRIEFING_RATE)
    return Response(audio, media_type="audio/wav", headers={"Cache-Control": "no-store"})


def _required_conversation(request: Request) -> str:
    found = _placed_conversation(request)
    if found is None:
        raise InvalidRequest("conversation_id is required.")
    return found


async def _signed(
    request: Request, ctx: Ctx, path: str
) -> tuple[list[tuple[str, str]], authn.CarrierPrincipal]:
    """A carrier callback's form fields, its `X-Twilio-Signature` proven over `path`."""
    params = await _form_fields(request)
    carrier = await authn.authenticate_carrier(
        ctx,
        path=path,
        query=request.scope.get("query_string", b"").decode("latin-1"),
        params=params,
        signature=request.headers.get("x-twilio-signature"),
    )
    return params, carrier


def _placed_conversation(request: Request) -> str | None:
    """The conversation a placed call's voice URL names, or None (an inbound call)."""
    given = request.query_params.getlist("conversation_id")
    if not given:
        return None
    if len(given) > 1 or not is_valid_conversation_id(given[0]):
        raise InvalidRequest("conversation_id is not a conversation ID.")
    return given[0]


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
