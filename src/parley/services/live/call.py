"""A phone call's media stream opening its conversation (API.md section 13).

The carrier sends no credential on the handshake: the stream's `start` carries the
single-use stream token the voice webhook put in the TwiML. Redeeming it (services/telephony)
is the handshake: it names the organization and the `pending` conversation, which the
session then configures from its agent (`Configure(agent=None)`). The socket is watched as
any other (watchdog.py): an end from elsewhere closes it; a call has no token to expire or
be revoked.
"""

from __future__ import annotations

from parley.clock import utcnow
from parley.db.repos import conversations as conversation_repo
from parley.errors import ConversationEnded, Unavailable
from parley.records import Principal
from parley.services import conversations, telephony
from parley.services.context import Context
from parley.services.live.handshake import Handshake, revocation_verdict


async def open_call(ctx: Context, *, conversation_id: str, stream_token: str) -> Handshake:
    """Redeem a call's stream token and return the handshake of its conversation.

    Raises InvalidStreamToken for a wrong, used, expired or foreign token (nothing starts),
    ConversationEnded for a call ended meanwhile, Unavailable when the stores do not answer.
    """
    org_id, conversation = await telephony.redeem_stream_token(
        ctx, conversation_id=conversation_id, token=stream_token
    )
    # A single-use credential for one conversation, the nearest kind to a stream token.
    principal = Principal(
        kind="session_token",
        org_id=org_id,
        credential_id=f"stream:{conversation.id}",
        conversation_ids=frozenset({conversation.id}),
    )
    handshake = Handshake(principal, conversation.id, False, None, None)
    try:  # the watchdog must be able to watch it: the shared store answers (fail closed)
        verdict = await revocation_verdict(ctx, handshake, conversation.id)
    except Unavailable:
        await abandon_call(ctx, org_id=org_id, conversation_id=conversation.id)  # token used
        raise
    if verdict is not None:
        raise ConversationEnded()
    return handshake


async def abandon_call(ctx: Context, *, org_id: str, conversation_id: str) -> None:
    """End a call whose stream was redeemed but whose conversation never went live (its
    agent was disabled meanwhile): it must not stay `pending` with its token used up.
    `ended_by` is `error`: the call failed, no one ended it."""
    async with ctx.db.transaction() as session:
        found = await conversation_repo.find(session, org_id, conversation_id, for_update=True)
        if found is None or found.status != "pending":
            return
        await conversation_repo.end(session, found, at=utcnow(ctx.clock), ended_by="error")
        await conversations.announce_ended(
            session, ctx, org_id=org_id, conversation_id=conversation_id
        )
