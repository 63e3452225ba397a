"""Dashboard sessions: sign in with an API key, hold a random session ID, sign out.

Rules:
1. Signing in needs an active API key; the browser gets a random 256-bit session ID and the
   database keeps only its SHA-256.
2. A session ends on sign-out, after 30 minutes without a request (idle), 12 hours after
   sign-in (absolute), or as soon as the API key that opened it is revoked.
3. Failed sign-ins are counted per client address (10 a minute, bursts of 10); past that
   the address is refused for 60 s, even with a good key, and gets 429.
4. Sign-in, sign-out and failed sign-ins with a known (revoked) key are audited; a key that
   matches nothing belongs to no organization, so its failure is only logged.
5. The dashboard lists conversations newest first (the API lists them oldest first).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from parley import credentials
from parley.clock import utcnow
from parley.db.repos import api_keys as key_repo
from parley.db.repos import conversations as conversation_repo
from parley.db.repos import dashboard_sessions as session_repo
from parley.errors import RateLimited, Unauthorized
from parley.records import Actor, Conversation, DashboardSession, Page
from parley.services import audit
from parley.services.context import Context
from parley.services.paging import page_of

log = logging.getLogger("parley.dashboard")

IDLE_SECONDS: Final = 30 * 60
ABSOLUTE_SECONDS: Final = 12 * 3600
BLOCK_SECONDS: Final = 60
TOUCH_EVERY_SECONDS: Final = 60
MAX_SESSION_ID_LENGTH: Final = 128


class SignInRefused(Unauthorized):
    code = "unauthorized"
    message = "That API key does not open the dashboard."


class SignInThrottled(RateLimited):
    code = "rate_limited"
    message = "Too many failed sign-ins from your address. Wait a minute and try again."


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A new session: the ID for the browser's cookie, shown nowhere else."""

    session_id: str
    session: DashboardSession


def _block_key(client: str) -> str:
    return f"dashboard-sign-in-block:{client}"


async def sign_in(ctx: Context, *, api_key: str, client: Actor) -> SignedIn:
    """Open a session with an API key; `client` carries the address and request ID."""
    address = client.client or "-"
    if await ctx.revocations.is_revoked(_block_key(address)):
        raise SignInThrottled(retry_after=BLOCK_SECONDS)
    secret_hash = (
        credentials.hash_secret(api_key) if credentials.classify(api_key) == "api_key" else None
    )
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        key = await key_repo.find_any_by_hash(session, secret_hash) if secret_hash else None
        if key is not None and key.revoked_at is None:
            session_id = secrets.token_urlsafe(32)
            opened = await session_repo.insert(
                session,
                id_hash=credentials.hash_secret(session_id),
                org_id=key.org_id,
                api_key_id=key.id,
                now=now,
                expires_at=now + timedelta(seconds=ABSOLUTE_SECONDS),
            )
            actor = _as_dashboard(client, key.id)
            await audit.record(
                session,
                ctx,
                org_id=key.org_id,
                actor=actor,
                action="dashboard.sign_in",
                target=key.id,
            )
            return SignedIn(session_id=session_id, session=opened)
        if key is not None:
            await audit.record(
                session,
                ctx,
                org_id=key.org_id,
                actor=_as_dashboard(client, key.id),
                action="dashboard.sign_in_failed",
                target=key.id,
                details={"reason": "revoked key"},
            )
    log.warning("dashboard sign-in failed from %s (request %s)", address, client.request_id or "-")
    decision = await ctx.sign_in_limiter.hit(f"dashboard-sign-in:{address}")
    if not decision.allowed:
        await ctx.revocations.revoke(
            _block_key(address), expires_at=ctx.clock.time() + BLOCK_SECONDS
        )
        raise SignInThrottled(retry_after=BLOCK_SECONDS)
    raise SignInRefused()


async def resume(ctx: Context, *, session_id: str) -> DashboardSession | None:
    """Return the live session with this ID, or None (ended, expired, idle or key revoked)."""
    if not session_id or len(session_id) > MAX_SESSION_ID_LENGTH:
        return None
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        live = await session_repo.find_live(
            session,
            credentials.hash_secret(session_id),
            now=now,
            idle_since=now - timedelta(seconds=IDLE_SECONDS),
        )
        if live is None:
            return None
        if (now - live.last_seen_at).total_seconds() >= TOUCH_EVERY_SECONDS:
            await session_repo.touch(session, live.id_hash, at=now)
        return live.record


async def sign_out(ctx: Context, *, session_id: str, client: Actor) -> None:
    """End the session on the server (idempotent)."""
    now = utcnow(ctx.clock)
    async with ctx.db.transaction() as session:
        live = await session_repo.find_live(
            session,
            credentials.hash_secret(session_id),
            now=now,
            idle_since=now - timedelta(seconds=IDLE_SECONDS),
        )
        if live is None:
            return
        await session_repo.end(session, live.id_hash, at=now)
        opened = live.record
        await audit.record(
            session,
            ctx,
            org_id=opened.org_id,
            actor=_as_dashboard(client, opened.api_key_id),
            action="dashboard.sign_out",
            target=opened.api_key_id,
        )


def _as_dashboard(client: Actor, api_key_id: str) -> Actor:
    return Actor(
        kind="dashboard", id=api_key_id, client=client.client, request_id=client.request_id
    )


async def recent_conversations(
    ctx: Context, *, org_id: str, cursor: str | None, limit: int
) -> Page[Conversation]:
    """The organization's conversations, newest first, `limit` a page; `next_cursor` the
    older ones (400 `invalid_cursor` for a cursor this listing did not make)."""
    async with ctx.db.read() as session:
        found = await conversation_repo.list_page(
            session,
            org_id,
            project_id=None,
            agent_id=None,
            only_ids=None,
            cursor=cursor,
            limit=limit,
            newest_first=True,
        )
    return page_of(found, limit=limit)
