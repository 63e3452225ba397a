"""services/authn.py is the one authentication path: besides REST and the conversation
socket (tests/api, tests/e2e), the carrier's voice webhook, a call's media stream and the
operator's /metrics scrape are proven there, with the rules they had (API.md sections 1, 13;
docs/reliability.md: metrics)."""

from __future__ import annotations

import secrets

import pytest

from parley.error_status import status_for
from parley.errors import InvalidCarrierSignature, InvalidStreamToken, Unauthorized
from parley.records import OPERATOR, AgentSpec
from parley.services import Context, agents, authn, telephony
from parley.services.twilio_signature import sign
from tests.carrier import new_account_sid, new_auth_token, new_call_sid
from tests.factories import make_org, unique_name

pytestmark = pytest.mark.anyio
TOKEN = "scrape-token-0123456789"


def test_authn_scrape_without_a_token_admits_any_request() -> None:
    assert authn.authenticate_scrape([], token=None) == authn.MetricsPrincipal(False)
    assert authn.authenticate_scrape(["Basic x"], token=None).token_checked is False


@pytest.mark.parametrize(
    "header", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER  {TOKEN} ", f"Bearer {TOKEN}\t"]
)
def test_authn_scrape_admits_the_one_bearer_token(header: str) -> None:
    assert authn.authenticate_scrape([header], token=TOKEN) == authn.MetricsPrincipal(True)


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [f"Basic {TOKEN}"],
        ["Bearer not-the-token-at-all"],
        [f"Bearer {TOKEN}x"],
        [f"Bearer {TOKEN[:-1]}"],
        ["Bearer"],
        [f"Bearer {TOKEN}", f"Bearer {TOKEN}"],  # two headers: not the one credential
        [f"Bearer {TOKEN}\u00e9"],
    ],
)
def test_authn_scrape_refuses_anything_else_401(headers: list[str]) -> None:
    with pytest.raises(Unauthorized) as refused:
        authn.authenticate_scrape(headers, token=TOKEN)
    assert refused.value.code == "unauthorized"


async def signed_account(ctx: Context) -> tuple[str, str, str]:
    """An organization with a Twilio account: (org, account_sid, auth_token)."""
    org = await make_org(ctx)
    sid, token = new_account_sid(), new_auth_token()
    await telephony.put_twilio_account(
        ctx, org_id=org.org.id, account_sid=sid, auth_token=token, actor=OPERATOR
    )
    return org.org.id, sid, token


def call(sid: str) -> list[tuple[str, str]]:
    return [("AccountSid", sid), ("CallSid", new_call_sid()), ("To", "+14155550100")]


async def test_authn_carrier_signature_names_the_accounts_organization(ctx: Context) -> None:
    org_id, sid, token = await signed_account(ctx)
    params = call(sid)
    url = telephony.voice_url(ctx) + "?x=1"
    carrier = await authn.authenticate_carrier(
        ctx, query="x=1", params=params, signature=sign(token, url, params)
    )
    assert carrier == authn.CarrierPrincipal(org_id=org_id, account_sid=sid)


async def test_authn_carrier_refuses_every_bad_signature_alike_403(ctx: Context) -> None:
    _, sid, token = await signed_account(ctx)
    params = call(sid)
    url = telephony.voice_url(ctx)
    unknown = call(new_account_sid())
    attempts = [
        (params, None),  # no signature
        (params, ""),
        (params, sign(new_auth_token(), url, params)),  # another key
        (params, sign(token, url + "?tampered=1", params)),  # another URL
        (params[:-1], sign(token, url, params)),  # a field dropped
        (unknown, sign(token, url, unknown)),  # an account no organization set
        ([("AccountSid", "not-a-sid"), *params[1:]], sign(token, url, params)),
    ]
    for fields, signature in attempts:
        with pytest.raises(InvalidCarrierSignature) as refused:
            await authn.authenticate_carrier(ctx, query="", params=fields, signature=signature)
        assert (refused.value.code, status_for(refused.value)) == ("invalid_signature", 403)


async def test_authn_stream_token_is_redeemed_once_for_its_conversation(ctx: Context) -> None:
    org_id, sid, token = await signed_account(ctx)
    agent_number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
    spec = AgentSpec(
        name=unique_name("agent"),
        voice_id="us_female",
        system_prompt="Be brief.",
        welcome_message=None,
        language="en",
        audio_format="pcm_16000",
        phone_numbers=(agent_number,),
        tools=(),
    )
    await agents.create_agent(ctx, org_id=org_id, project=None, spec=spec, actor=OPERATOR)
    params = [("AccountSid", sid), ("CallSid", new_call_sid()), ("To", agent_number)]
    signature = sign(token, telephony.voice_url(ctx), params)
    carrier = await authn.authenticate_carrier(ctx, query="", params=params, signature=signature)
    answer = await telephony.answer_call(ctx, org_id=carrier.org_id, params=params)
    assert answer.conversation_id is not None
    assert answer.stream_token is not None
    stream = await authn.authenticate_stream(
        ctx, conversation_id=answer.conversation_id, stream_token=answer.stream_token
    )
    assert stream.conversation.id == answer.conversation_id
    assert stream.principal.org_id == org_id
    assert stream.principal.conversation_ids == frozenset({answer.conversation_id})
    with pytest.raises(InvalidStreamToken):  # single-use
        await authn.authenticate_stream(
            ctx, conversation_id=answer.conversation_id, stream_token=answer.stream_token
        )
