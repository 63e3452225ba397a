"""Session tokens (API.md section 6): short-lived, optionally bound to conversations, and
revocable at once on every instance.

Rules:
1. Created only with an API key; `ttl_seconds` 60..3600 (default 300); at most 100
   `conversation_ids`.
2. Stored as the SHA-256 of the secret; shown once.
3. Revocation is instant: the database marks it (the next request on any instance is
   refused) and the shared Revocations store tells live WebSockets, which close within 2 s
   (services/revocations.py: committed first, published when the store can take it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import session_tokens as token_repo
from parley.errors import Forbidden, SessionTokenNotFound, ValidationFailed
from parley.ids import new_id
from parley.records import Actor, IssuedSessionToken, SessionToken
from parley.services import audit, revocations
from parley.services.context import Context
from parley.services.conversations import check_conversation_id

MIN_TTL_SECONDS = 60
MAX_TTL_SECONDS = 3600
DEFAULT_TTL_SECONDS = 300
MAX_CONVERSATION_IDS = 100


async def create_session_token(
    ctx: Context,
    *,
    org_id: str,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    conversation_ids: Sequence[str] | None = None,
    actor: Actor,
) -> IssuedSessionToken:
    """Issue a session token for the organization."""
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise ValidationFailed(param_errors={"ttl_seconds": "must be between 60 and 3600"})
    if conversation_ids is not None:
        if len(conversation_ids) > MAX_CONVERSATION_IDS:
            raise ValidationFailed(param_errors={"conversation_ids": "at most 100"})
        for index, conversation_id in enumerate(conversation_ids):
            check_conversation_id(conversation_id, field=f"conversation_ids.{index}")
    secret = credentials.new_session_token()
    now = utcnow(ctx.clock)
    token = SessionToken(
        id=new_id("sess"),
        org_id=org_id,
        conversation_ids=frozenset(conversation_ids) if conversation_ids is not None else None,
        expires_at=now + timedelta(seconds=ttl_seconds),
        created_at=now,
        revoked_at=None,
    )
    async with ctx.db.transaction() as session:
        await token_repo.insert(session, token, secret_hash=credentials.hash_secret(secret))
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="session_token.create",
            target=token.id,
            details={"ttl_seconds": ttl_seconds, "conversation_ids": len(conversation_ids or ())},
        )
    return IssuedSessionToken(token=token, secret=secret)


async def revoke_session_token(ctx: Context, *, org_id: str, token_id: str, actor: Actor) -> None:
    """Revoke a token: refused on the next request everywhere; live sockets close."""
    async with ctx.db.transaction() as session:
        token = await token_repo.get(session, token_id)
        if token is None:
            raise SessionTokenNotFound()
        if token.org_id != org_id:
            raise Forbidden()
        await token_repo.revoke(session, token, at=utcnow(ctx.clock))
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="session_token.revoke",
            target=token_id,
        )
        pending = await revocations.queue(
            session, ctx, token_id, expires_at=token.expires_at.timestamp()
        )
    await revocations.publish(ctx, pending)


async def list_active(ctx: Context, *, org_id: str) -> list[SessionToken]:
    """List the organization's tokens that are neither revoked nor expired, newest first."""
    async with ctx.db.read() as session:
        return await token_repo.list_active(session, org_id, now=utcnow(ctx.clock))


async def find_active(ctx: Context, secret: str) -> SessionToken | None:
    """Return the unexpired, unrevoked token with this secret."""
    async with ctx.db.point_read() as connection:  # by its hash's unique index
        token = await token_repo.find_by_hash(connection, credentials.hash_secret(secret))
    if token is None or token.revoked_at is not None:
        return None
    if token.expires_at.timestamp() <= ctx.clock.time():
        return None
    return token
