"""Authenticating the conversation WebSocket's handshake (API.md section 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parley import jwt
from parley.errors import (
    ConversationEnded,
    InsufficientScope,
    Unauthorized,
)
from parley.records import Principal
from parley.services import conversations, endings
from parley.services.authn import ANY_KIND, authenticate, presented_credential
from parley.services.context import Context
from parley.services.endings import Ending


@dataclass(frozen=True, slots=True)
class Handshake:
    """An authenticated handshake: who, which conversation, and what ends the socket."""

    principal: Principal
    conversation_id: str | None
    create_if_missing: bool
    expires_at: float | None
    """Unix time after which the socket closes (a JWT's `exp` + 30 s)."""
    revocable_id: str | None
    """The session token whose revocation closes the socket."""


async def open_handshake(
    ctx: Context,
    *,
    query_jwt: str | None,
    query_session_token: str | None,
    authorization: Sequence[str],
    conversation_id: str | None,
    query_conversation_token: str | None = None,
    client: str | None = None,
) -> Handshake:
    """Authenticate a WebSocket handshake: exactly one credential (API.md section 8);
    `client` is the handshake's address (services/authn.py rule 10).

    A JWT may open its own conversation (created on first use) or the one
    `?conversation_id=` names, if the token names it too; an API key or session token opens
    a new conversation, or a `pending` one it may access; a conversation token (used up
    here) a new conversation with its agent (API.md section 17).
    """
    credential = presented_credential(
        authorization,
        query_jwt=query_jwt,
        query_session_token=query_session_token,
        query_conversation_token=query_conversation_token,
    )

    async def can_open(org_id: str, accessed: str) -> None:
        await conversations.check_can_open(  # a JWT's conversation is created on first use
            ctx, org_id=org_id, conversation_id=accessed, missing_ok=True
        )

    principal = await authenticate(
        ctx,
        credential,
        accepts=ANY_KIND | {"conversation_token"},
        conversation_id=conversation_id,
        token_names_conversation=True,
        while_admitting=can_open,  # the status read beside the `jti` claim
        client=client,
    )
    if principal.token is not None:
        accessed = principal.token.conversation_id if conversation_id is None else conversation_id
        expires_at = principal.token.exp + jwt.SKEW_SECONDS
        return await _watchable(ctx, Handshake(principal, accessed, True, expires_at, None))
    if conversation_id is None:
        if principal.conversation_ids is not None:
            raise InsufficientScope()
    else:
        if not principal.may_access(conversation_id):
            raise InsufficientScope()
        await conversations.check_can_open(
            ctx, org_id=principal.org_id, conversation_id=conversation_id
        )
    revocable = principal.credential_id if principal.kind == "session_token" else None
    return await _watchable(ctx, Handshake(principal, conversation_id, False, None, revocable))


async def revocation_verdict(
    ctx: Context, handshake: Handshake, conversation_id: str | None
) -> Ending | None:
    """Ask the shared store whether the socket must close now: how, or None.

    Raises Unavailable when the store does not answer.
    """
    if handshake.revocable_id is not None and await ctx.revocations.is_revoked(
        handshake.revocable_id
    ):
        return endings.TOKEN_REVOKED
    if conversation_id is not None and await ctx.revocations.is_revoked(
        endings.ended_marker(handshake.principal.org_id, conversation_id)
    ):
        return endings.ENDED_ELSEWHERE
    return None


async def _watchable(ctx: Context, handshake: Handshake) -> Handshake:
    """Admit a socket only if its watchdog can watch it: the shared store must answer.

    During a store outage no new socket opens (503, fail closed); sockets already open
    ride it out for a while (watchdog.py). What the store already holds also refuses.
    """
    verdict = await revocation_verdict(ctx, handshake, handshake.conversation_id)
    if handshake.revocable_id is None and handshake.conversation_id is None:
        await ctx.revocations.is_revoked(handshake.principal.credential_id)  # answers at all?
    if verdict is not None:
        raise Unauthorized() if verdict is endings.TOKEN_REVOKED else ConversationEnded()
    return handshake
