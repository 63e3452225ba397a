"""Authenticating the conversation WebSocket's handshake (API.md section 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parley import credentials, jwt
from parley.errors import ConversationNotFound, InsufficientScope, MultipleCredentials, Unauthorized
from parley.services import conversations
from parley.services.authn import Principal, authenticate, bearer_credential
from parley.services.context import Context


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
) -> Handshake:
    """Authenticate a WebSocket handshake: exactly one credential (API.md section 8)."""
    given = [c for c in (query_jwt, query_session_token) if c is not None]
    if len(given) + (1 if authorization else 0) > 1 or len(authorization) > 1:
        raise MultipleCredentials()
    credential = given[0] if given else bearer_credential(authorization)
    if len(credential) > credentials.MAX_CREDENTIAL_BYTES:
        raise jwt.InvalidToken()
    kind = credentials.classify(credential)
    if (query_jwt is not None and kind != "jwt") or (
        query_session_token is not None and kind != "session_token"
    ):
        raise Unauthorized()
    if kind == "jwt":
        return await _jwt_handshake(ctx, credential, conversation_id)
    principal = await authenticate(ctx, credential)
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
    return Handshake(principal, conversation_id, False, None, revocable)


async def _jwt_handshake(ctx: Context, token: str, conversation_id: str | None) -> Handshake:
    verified = await jwt.verify(token, issuers=ctx.jwt.issuers, clock=ctx.clock)
    accessed = conversation_id if conversation_id is not None else verified.conversation_id
    await jwt.admit(
        verified,
        conversation_id=accessed,
        limiter=ctx.jwt.rate_limiter,
        replay_guard=ctx.jwt.replay_guard,
    )
    try:
        await conversations.check_can_open(ctx, org_id=verified.org_id, conversation_id=accessed)
    except ConversationNotFound:
        pass  # a JWT's conversation is created on first use
    principal = Principal(
        kind="jwt",
        org_id=verified.org_id,
        credential_id=verified.jti or "",
        token=verified,
        expires_at=float(verified.exp),
    )
    return Handshake(principal, accessed, True, verified.exp + jwt.SKEW_SECONDS, None)
