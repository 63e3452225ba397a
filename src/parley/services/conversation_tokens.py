"""Conversation tokens (API.md section 17): a browser with no backend-minted JWT opens one
conversation with one agent.

Rules:
1. Created only with an API key, for an agent of the organization (`agent_id`: its ID, or
   its name in project `main`; 404 `agent_not_found`, 403 `forbidden` for another
   organization's); `ttl_seconds` 30..60 (default 30).
2. Stored as the SHA-256 of the secret; shown once. Creation is audited.
3. Single-use: the first WebSocket handshake that presents it uses it up, in one statement
   (`UPDATE … WHERE used_at IS NULL AND expires_at > now RETURNING`), so of two handshakes
   on any instances exactly one gets it. Used, expired or unknown: 401 `unauthorized`.
4. It opens a new conversation with its agent and nothing else: a `config` naming another
   agent is refused (`forbidden`, close 1008: services/live/starting.py); it names no
   conversation and reads none over REST (403 `insufficient_scope`, the token unspent).
"""

from __future__ import annotations

from datetime import timedelta

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import conversation_tokens as token_repo
from parley.errors import ValidationFailed
from parley.records import Actor, ConversationToken, IssuedConversationToken
from parley.services import agents, audit
from parley.services.context import Context, DatabaseContext

MIN_TTL_SECONDS = 30
MAX_TTL_SECONDS = 60
DEFAULT_TTL_SECONDS = 30
KEPT_AFTER_EXPIRY = timedelta(hours=1)
"""How long an expired token's row stays before the sweep deletes it."""


async def create_conversation_token(
    ctx: Context,
    *,
    org_id: str,
    agent_ref: str,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    actor: Actor,
) -> IssuedConversationToken:
    """Issue a conversation token for one agent of the organization (rules 1 and 2)."""
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise ValidationFailed(
            param_errors={"ttl_seconds": f"must be between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS}"}
        )
    agent = await agents.get_agent(ctx, org_id=org_id, ref=agent_ref, project=None)
    secret = credentials.new_conversation_token()
    now = utcnow(ctx.clock)
    token = ConversationToken(
        org_id=org_id, agent_id=agent.id, expires_at=now + timedelta(seconds=ttl_seconds)
    )
    secret_hash = credentials.hash_secret(secret)
    async with ctx.db.transaction() as session:
        await token_repo.insert(session, token, secret_hash=secret_hash, at=now)
        await audit.record(
            session,
            ctx,
            org_id=org_id,
            actor=actor,
            action="conversation_token.create",
            target=agent.id,
            details={"ttl_seconds": ttl_seconds},
        )
    return IssuedConversationToken(token=token, secret=secret)


async def redeem_conversation_token(ctx: DatabaseContext, secret: str) -> ConversationToken | None:
    """Use the token up and return it, or None when it is used, expired or unknown (rule 3)."""
    async with ctx.db.transaction() as session:
        return await token_repo.use(session, credentials.hash_secret(secret), at=utcnow(ctx.clock))


async def sweep_expired(ctx: DatabaseContext) -> int:
    """Delete a batch of tokens expired for a while; return how many."""
    async with ctx.db.transaction() as session:
        return await token_repo.sweep(session, before=utcnow(ctx.clock) - KEPT_AFTER_EXPIRY)
