"""The carrier's REST API client (parley/outbound/carrier.py) against the simulated carrier's
API on a real loopback socket (tests/carrier_api.py): the form fields and Basic credentials
of API.md section 15, and every failure a CarrierError (502 `carrier_error`) that names the
carrier's message and never the auth token."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import ValidationError
from tests.carrier_api import CarrierApi, Failure
from tests.carrier_calls import Failed
from tests.factories import make_org

from parley.config import Settings
from parley.error_status import status_for
from parley.errors import CarrierError, TelephonyNotConfigured
from parley.outbound import CarrierAccount, OutboundClient, TwilioCalls
from parley.outbound.carrier import MAX_ANSWER_BYTES, TIMEOUT_SECONDS
from parley.records import OPERATOR
from parley.services import Context, telephony

pytestmark = pytest.mark.anyio

PUBLIC = "http://127.0.0.1:9"
"""Parley's public URL in these calls: the callbacks the simulator sends are refused at once."""
DIAL = '<Response><Dial timeout="20"><Number>+14155550199</Number></Dial></Response>'


@pytest.fixture
async def api() -> AsyncIterator[CarrierApi]:
    async with CarrierApi() as running:
        running.script(*[Failed()] * 5)  # no callbacks to a Parley that is not there
        yield running


@pytest.fixture
async def calls(api: CarrierApi) -> AsyncIterator[TwilioCalls]:
    outbound = OutboundClient()
    try:
        yield TwilioCalls(outbound, api_url=api.url + "/")
    finally:
        await outbound.aclose()


def account_of(api: CarrierApi) -> CarrierAccount:
    return CarrierAccount(account_sid=api.account_sid, auth_token=api.auth_token)


async def place(calls: TwilioCalls, account: CarrierAccount) -> str:
    return await calls.create_call(
        account,
        to="+14155550100",
        from_="+14155550123",
        url=f"{PUBLIC}/v1/telephony/twilio/voice?conversation_id=conv_1",
        status_callback=f"{PUBLIC}/v1/telephony/twilio/status",
        amd_callback=f"{PUBLIC}/v1/telephony/twilio/amd",
    )


async def refusal(calls: TwilioCalls, account: CarrierAccount) -> CarrierError:
    with pytest.raises(CarrierError) as failed:
        await place(calls, account)
    error = failed.value
    assert (error.code, status_for(error)) == ("carrier_error", 502)
    assert account.auth_token not in f"{error.message} {error!r} {error.args}"
    return error


async def test_create_call_posts_the_contracts_form_with_basic_auth(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    sid = await place(calls, account_of(api))
    assert sid in api.calls
    (request,) = api.requests
    assert request.path == f"/2010-04-01/Accounts/{api.account_sid}/Calls.json"
    assert (request.username, request.password) == (api.account_sid, api.auth_token)
    assert request.content_type.startswith("application/x-www-form-urlencoded")
    assert request.user_agent == "Parley-Carrier"
    assert request.form == [
        ("To", "+14155550100"),
        ("From", "+14155550123"),
        ("Url", f"{PUBLIC}/v1/telephony/twilio/voice?conversation_id=conv_1"),
        ("StatusCallback", f"{PUBLIC}/v1/telephony/twilio/status"),
        ("StatusCallbackEvent", "initiated"),
        ("StatusCallbackEvent", "ringing"),
        ("StatusCallbackEvent", "answered"),
        ("StatusCallbackEvent", "completed"),
        ("MachineDetection", "DetectMessageEnd"),
        ("AsyncAmd", "true"),
        ("AsyncAmdStatusCallback", f"{PUBLIC}/v1/telephony/twilio/amd"),
        ("Timeout", "30"),
    ]


async def test_update_call_sends_twiml_or_status_alone(api: CarrierApi, calls: TwilioCalls) -> None:
    api.script(Failed())
    account = account_of(api)
    sid = await place(calls, account)
    await api.calls[sid].wait_finished(10)
    api.calls[sid].status = "in-progress"  # as if the callee had answered
    await calls.update_call(account, sid, twiml=DIAL)
    await calls.update_call(account, sid, status="completed")
    transfer, hang_up = api.requests[1:]
    assert (
        transfer.path == hang_up.path == f"/2010-04-01/Accounts/{api.account_sid}/Calls/{sid}.json"
    )
    assert transfer.form == [("Twiml", DIAL)]
    assert hang_up.form == [("Status", "completed")]
    assert (hang_up.username, hang_up.password) == (api.account_sid, api.auth_token)
    with pytest.raises(ValueError, match="not both"):
        await calls.update_call(account, sid, twiml=DIAL, status="canceled")


async def test_carrier_refusing_the_credentials_is_a_carrier_error_naming_its_message(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    wrong = CarrierAccount(account_sid=api.account_sid, auth_token="f" * 32)
    error = await refusal(calls, wrong)
    assert error.message == (
        "The carrier's API refused the request (HTTP 401, error 20003): "
        "Authentication Error - invalid username"
    )
    assert (error.status, error.carrier_code) == (401, 20003)
    assert api.calls == {}


async def test_carrier_400_passes_its_twilio_message_on(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    api.fail_next(Failure.twilio(400, 21211, "The 'To' number +1415 is not a valid phone number."))
    error = await refusal(calls, account_of(api))
    assert error.message == (
        "The carrier's API refused the request (HTTP 400, error 21211): "
        "The 'To' number +1415 is not a valid phone number."
    )


async def test_carrier_500_without_a_json_body_is_a_carrier_error(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    api.fail_next(Failure.server_error())
    error = await refusal(calls, account_of(api))
    assert error.message == "The carrier's API refused the request (HTTP 500)."
    assert (error.status, error.carrier_code) == (500, None)


async def test_carrier_echoing_the_auth_token_never_reaches_the_message(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    api.fail_next(Failure.twilio(400, 20001, f"Bad token {api.auth_token}\r\nSet-Cookie: x"))
    error = await refusal(calls, account_of(api))
    assert error.message.endswith(": Bad token [redacted] Set-Cookie: x")


async def test_carrier_message_is_cut_to_300_characters(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    api.fail_next(Failure.twilio(400, 21211, "x" * 5000))
    error = await refusal(calls, account_of(api))
    assert error.message.endswith(": " + "x" * 299 + "…")


async def test_carrier_silent_for_ten_seconds_is_a_carrier_error(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    assert TIMEOUT_SECONDS == 10
    api.fail_next(Failure.slow(TIMEOUT_SECONDS + 5))
    started = time.monotonic()
    error = await refusal(calls, account_of(api))
    elapsed = time.monotonic() - started
    assert error.message == "The carrier's API did not answer in time."
    assert TIMEOUT_SECONDS - 0.5 <= elapsed < TIMEOUT_SECONDS + 2, elapsed


async def test_carrier_redirect_is_not_followed(api: CarrierApi, calls: TwilioCalls) -> None:
    api.fail_next(Failure.redirect(f"{api.url}/2010-04-01/Accounts/{api.account_sid}/Calls.json"))
    error = await refusal(calls, account_of(api))
    assert "redirect (HTTP 307), which is not followed" in error.message
    assert len(api.requests) == 1
    assert api.calls == {}


async def test_carrier_answer_past_64_kib_is_refused(api: CarrierApi, calls: TwilioCalls) -> None:
    assert MAX_ANSWER_BYTES == 64 * 1024
    api.fail_next(Failure.huge())
    error = await refusal(calls, account_of(api))
    assert error.message == "The carrier's API answered with more than 64 KiB."


async def test_carrier_created_call_without_a_sid_is_a_carrier_error(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    api.fail_next(Failure(status=201, body=b'{"status": "queued"}'))
    error = await refusal(calls, account_of(api))
    assert error.message == "The carrier's API accepted the call but gave no call SID."


async def test_carrier_unreachable_is_a_carrier_error(api: CarrierApi) -> None:
    outbound = OutboundClient()
    gone = TwilioCalls(outbound, api_url="http://127.0.0.1:1")
    try:
        error = await refusal(gone, account_of(api))
    finally:
        await outbound.aclose()
    assert error.message == "The carrier's API could not be reached."


async def test_update_of_an_ended_call_tells_twilios_code(
    api: CarrierApi, calls: TwilioCalls
) -> None:
    account = account_of(api)
    sid = await place(calls, account)
    await api.calls[sid].wait_finished(10)  # Failed(): the call has ended
    with pytest.raises(CarrierError) as failed:
        await calls.update_call(account, sid, status="completed")
    assert (failed.value.status, failed.value.carrier_code) == (400, 21220)
    assert failed.value.message.endswith(": Call is not in-progress. Cannot redirect.")


@pytest.mark.parametrize("sid", ["../Calls", "CA1/../x", "", "CA" + "0" * 70, "CA 1"])
async def test_call_sid_that_could_change_the_path_is_refused_unsent(
    api: CarrierApi, calls: TwilioCalls, sid: str
) -> None:
    with pytest.raises(CarrierError):
        await calls.update_call(account_of(api), sid, status="completed")
    assert api.requests == []


def test_carrier_account_repr_hides_the_auth_token() -> None:
    account = CarrierAccount(account_sid="AC" + "1" * 32, auth_token="secret-token-value")
    assert "secret-token-value" not in repr(account)


@pytest.mark.parametrize(
    "url",
    ["ftp://api.example.com", "api.twilio.com", "https://sid:token@api.twilio.com",
     "https://api.twilio.com/?x=1", "https://api.twilio.com:0"],
)  # fmt: skip
def test_twilio_api_url_setting_must_be_plain_http_or_https(url: str) -> None:
    with pytest.raises(ValidationError, match=r"PARLEY_TWILIO_API_URL|port"):
        Settings(_env_file=None, twilio_api_url=url)


def test_twilio_api_url_setting_defaults_to_twilio_and_drops_a_trailing_slash() -> None:
    assert Settings(_env_file=None).twilio_api_url == "https://api.twilio.com"
    built = Settings(_env_file=None, twilio_api_url="http://127.0.0.1:9/")
    assert built.twilio_api_url == "http://127.0.0.1:9"


# --- through the services' Context, as the composition root builds it ---------------------


@pytest.fixture
def settings(settings_factory: Any, api: CarrierApi) -> Settings:
    built: Settings = settings_factory(twilio_api_url=api.url, public_url=PUBLIC)
    return built


async def test_context_carrier_places_a_call_with_the_orgs_sealed_credentials(
    ctx: Context, api: CarrierApi
) -> None:
    org = (await make_org(ctx)).org.id
    with pytest.raises(TelephonyNotConfigured):
        await telephony.carrier_account(ctx, org_id=org)
    await telephony.put_twilio_account(
        ctx, org_id=org, account_sid=api.account_sid, auth_token=api.auth_token, actor=OPERATOR
    )
    account = await telephony.carrier_account(ctx, org_id=org)
    assert account == account_of(api)
    assert ctx.carrier.api_url == api.url
    sid = await place(ctx.carrier, account)
    assert list(api.calls) == [sid]
    assert (api.requests[0].username, api.requests[0].password) == (
        api.account_sid,
        api.auth_token,
    )
