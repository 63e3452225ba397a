"""A call's media stream opening its conversation (services/live/call.py): the stream token,
redeemed by services/authn.py, is the handshake, and a call that cannot go live is not left
`pending` with its token used."""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from parley.errors import InvalidStreamToken, Unavailable
from parley.records import OPERATOR, AgentSpec
from parley.services import Context, agents, authn, conversations, telephony
from parley.services.live import Handshake
from parley.services.live.call import open_call
from parley.services.twilio_signature import sign
from tests.carrier import new_account_sid, new_auth_token, new_call_sid
from tests.factories import make_org, unique_name

pytestmark = pytest.mark.anyio


class DownRevocations:
    """A revocation store that does not answer (Redis down)."""

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        raise Unavailable()

    async def is_revoked(self, credential_id: str) -> bool:
        raise Unavailable()


async def pending_call(ctx: Context) -> tuple[str, str, str]:
    """Place a call to a fresh agent's number; return (org, conversation, stream token)."""
    org = await make_org(ctx)
    number = "+1415" + "".join(str(secrets.randbelow(10)) for _ in range(7))
    spec = AgentSpec(
        name=unique_name("agent"),
        voice_id="us_female",
        system_prompt="Be brief.",
        welcome_message=None,
        language="en",
        audio_format="pcm_16000",
        phone_numbers=(number,),
        tools=(),
    )
    await agents.create_agent(ctx, org_id=org.org.id, project=None, spec=spec, actor=OPERATOR)
    sid, token = new_account_sid(), new_auth_token()
    await telephony.put_twilio_account(
        ctx, org_id=org.org.id, account_sid=sid, auth_token=token, actor=OPERATOR
    )
    params = [("AccountSid", sid), ("CallSid", new_call_sid()), ("From", "+15005550006")]
    params.append(("To", number))
    signature = sign(token, telephony.voice_url(ctx), params)
    carrier = await authn.authenticate_carrier(ctx, query="", params=params, signature=signature)
    assert carrier.org_id == org.org.id
    answer = await telephony.answer_call(ctx, org_id=carrier.org_id, params=params)
    assert answer.conversation_id is not None
    assert answer.stream_token is not None
    return org.org.id, answer.conversation_id, answer.stream_token


async def open_stream(ctx: Context, conversation_id: str, token: str) -> Handshake:
    """What the media socket does with a stream's `start`: authenticate, then open."""
    stream = await authn.authenticate_stream(
        ctx, conversation_id=conversation_id, stream_token=token
    )
    return await open_call(ctx, stream)


async def status(ctx: Context, org_id: str, conversation_id: str) -> tuple[str, str | None]:
    found = await conversations.get_conversation(
        ctx, org_id=org_id, conversation_id=conversation_id
    )
    return found.status, found.ended_by


async def test_open_call_token_names_org_and_conversation(ctx: Context) -> None:
    org_id, conversation_id, token = await pending_call(ctx)
    handshake = await open_stream(ctx, conversation_id, token)
    assert handshake.principal.org_id == org_id
    assert handshake.conversation_id == conversation_id
    assert handshake.create_if_missing is False
    assert handshake.expires_at is None
    assert handshake.revocable_id is None


async def test_open_call_token_used_once(ctx: Context) -> None:
    _, conversation_id, token = await pending_call(ctx)
    await open_stream(ctx, conversation_id, token)
    with pytest.raises(InvalidStreamToken):
        await open_stream(ctx, conversation_id, token)


async def test_open_call_store_down_fails_closed_and_ends_call(ctx: Context) -> None:
    org_id, conversation_id, token = await pending_call(ctx)
    down = dataclasses.replace(ctx, revocations=DownRevocations())
    with pytest.raises(Unavailable):
        await open_stream(down, conversation_id, token)
    assert await status(ctx, org_id, conversation_id) == ("ended", "error")  # not left pending
