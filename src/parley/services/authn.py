"""Authentication: from what a request presents to a principal (API.md sections 1 and 13).

The one path of every request and socket that carries a credential; the HTTP layer calls
nothing else to authenticate:
- REST and the conversation WebSocket: `presented_credential` picks the credential,
  `authenticate` proves it and decides whether its kind may act here, and only then admits
  a JWT (steps 9 to 11: rate limit, `jti`);
- the carrier's voice webhook: `authenticate_carrier` checks its `X-Twilio-Signature`
  (the algorithm: services/twilio_signature.py) and names the account's organization;
- a call's media socket: `authenticate_stream` redeems the stream token of its `start`
  (services/telephony.py rule 4);
- `/metrics`: `authenticate_scrape` checks the operator's `PARLEY_METRICS_TOKEN`.

Rules:
1. Exactly one credential per request: a second Authorization header, or a header and a
   query credential (WebSocket), is refused (400 `multiple_credentials`); any scheme but
   `Bearer` (case-insensitive) or an empty token is refused (401 `unauthorized`).
2. A credential of more than 8 KiB is refused (401 `invalid_token`).
3. A missing, malformed, unknown, revoked or expired API key or session token gives the
   same 401 `unauthorized`, with no hint which part was wrong. A string that is neither
   and contains a `.` is a JWT candidate: a malformed one is 401 `invalid_token`.
4. An opaque credential is found by the SHA-256 of its secret: no secret is ever compared
   in Python, so there is nothing to time. Known ones are cached, revocation staying
   instant (services/credential_cache.py).
5. A credential whose kind may not act on the route is 403 `insufficient_scope`, decided
   before anything is admitted or recorded: a JWT refused there keeps its `jti` unused.
6. A carrier callback's signature (the voice webhook, a call's status and machine-detection
   callbacks) is over `PARLEY_PUBLIC_URL` + path + query (never the Host header a proxy
   passes on), compared in constant time, and computed for an unknown account too (a dummy
   key), so the answer takes as long: a missing or wrong signature and an unknown
   `AccountSid` get one answer, 403 `invalid_signature`.
7. A scrape of `/metrics`, when the operator set a token, carries exactly one
   `Authorization: Bearer <token>`, compared in constant time; anything else is 401
   `unauthorized`.
8. A conversation token (API.md section 17) acts only where `conversation_token` is
   accepted (the WebSocket handshake) and names no conversation; elsewhere 403
   `insufficient_scope`, decided before it is used up. It is used up by the lookup that
   proves it (services/conversation_tokens.py), so it is never cached.
9. An API key's secret that a rotation replaced proves the key until its grace ends
   (services/api_keys.py rule 3); each such use is counted (services/grace_uses.py).
10. An API key or session token used from outside its organization's `ip_allowlist` is
    403 `ip_not_allowed`, decided after the scope (services/workspace.py rules 2 and 3:
    the client address is the caller's to pass, None when unknown, which a non-empty
    allowlist refuses). JWTs and conversation tokens are not limited by it.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from parley import credentials, jwt
from parley.credentials import CredentialKind
from parley.db.repos import telephony as telephony_repo
from parley.errors import (
    InsufficientScope,
    InvalidCarrierSignature,
    MultipleCredentials,
    Unauthorized,
    Unavailable,
)
from parley.records import Conversation, Principal
from parley.services import api_keys, conversation_tokens, session_tokens, telephony, workspace
from parley.services.context import Context
from parley.services.twilio_signature import signature_matches

log = logging.getLogger(__name__)
_WHITESPACE = re.compile(r"\s")  # the same characters as str.isspace, one C scan

ANY_KIND: frozenset[CredentialKind] = frozenset({"api_key", "session_token", "jwt"})
OPAQUE_KINDS: frozenset[CredentialKind] = frozenset({"api_key", "session_token"})
"""The kinds of most REST routes: an API key or a session token (a JWT acts on fewer)."""
_DUMMY_AUTH_TOKEN: Final = "0" * 32
"""Keys the HMAC computed for an unknown carrier account (rule 6)."""


@dataclass(frozen=True, slots=True)
class CarrierPrincipal:
    """A voice webhook whose signature is the account's: the carrier, for one organization."""

    org_id: str
    account_sid: str


@dataclass(frozen=True, slots=True)
class StreamPrincipal:
    """A call's media stream whose token was redeemed: its `pending` conversation, and the
    principal the session runs it as (single-use, for that one conversation)."""

    principal: Principal
    conversation: Conversation


@dataclass(frozen=True, slots=True)
class MetricsPrincipal:
    """A scrape of `/metrics` the operator's token admits (or any, with no token set)."""

    token_checked: bool


def bearer_credential(header_values: Sequence[str]) -> str:
    """Extract the one bearer credential from the Authorization header values."""
    if not header_values:
        raise Unauthorized()
    if len(header_values) > 1:
        raise MultipleCredentials()
    scheme, _, token = header_values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or _WHITESPACE.search(token):
        raise Unauthorized()
    if len(token) > credentials.MAX_CREDENTIAL_BYTES:
        raise jwt.InvalidToken()
    return token


def presented_credential(
    authorization: Sequence[str],
    *,
    query_jwt: str | None = None,
    query_session_token: str | None = None,
    query_conversation_token: str | None = None,
) -> str:
    """Return the one credential presented (rules 1 and 2): the header's bearer token, or
    (WebSocket handshakes) `?jwt=`, `?session_token=` or `?conversation_token=`, which must
    hold that kind."""
    queried = (query_jwt, query_session_token, query_conversation_token)
    given = [value for value in queried if value is not None]
    if len(given) + (1 if authorization else 0) > 1 or len(authorization) > 1:
        raise MultipleCredentials()
    credential = given[0] if given else bearer_credential(authorization)
    if len(credential) > credentials.MAX_CREDENTIAL_BYTES:
        raise jwt.InvalidToken()
    kind = credentials.classify(credential)
    if (
        (query_jwt is not None and kind != "jwt")
        or (query_session_token is not None and kind != "session_token")
        or (query_conversation_token is not None and kind != "conversation_token")
    ):
        raise Unauthorized()
    return credential


async def authenticate(
    ctx: Context,
    credential: str,
    *,
    accepts: frozenset[CredentialKind] = ANY_KIND,
    conversation_id: str | None = None,
    token_names_conversation: bool = False,
    while_admitting: Callable[[str, str], Awaitable[None]] | None = None,
    client: str | None = None,
) -> Principal:
    """Prove a credential and return its principal, or raise (rules 3 to 5).

    `accepts`: the kinds that may act here (others: 403, nothing admitted). A JWT is
    admitted (API.md section 7 steps 9 to 11: it must name the conversation, it counts
    against its rate limit, its `jti` is spent) only for `conversation_id`, or, with
    `token_names_conversation` (a WebSocket without `?conversation_id=`), for the one it
    names; with neither, a valid JWT is 403 `insufficient_scope`.

    `while_admitting(org_id, conversation_id)`: a check that runs beside a JWT's admission
    (its `jti` claim waits for a group commit) instead of after it; admission's error wins.

    `client`: the request's address, checked against the organization's `ip_allowlist`
    for an API key or a session token (rule 8).
    """
    kind = credentials.classify(credential)
    if kind == "jwt":
        verified = await jwt.verify(credential, issuers=ctx.jwt.issuers, clock=ctx.clock)
        accessed = conversation_id
        if accessed is None and token_names_conversation:
            accessed = verified.conversation_id
        if "jwt" not in accepts or accessed is None:
            raise InsufficientScope()
        admission = jwt.admit(
            verified,
            conversation_id=accessed,
            limiter=ctx.jwt.rate_limiter,
            replay_guard=ctx.jwt.replay_guard,
        )
        if while_admitting is None:
            await admission
        else:
            await _side_by_side(admission, while_admitting(verified.org_id, accessed))
        return Principal(
            kind="jwt",
            org_id=verified.org_id,
            credential_id=verified.jti or "",
            token=verified,
            expires_at=float(verified.exp),
        )
    if kind == "conversation_token":
        return await _conversation_token_principal(
            ctx, credential, accepts=accepts, conversation_id=conversation_id
        )
    principal = None if kind is None else await _opaque_principal(ctx, credential, kind)
    if principal is None:
        raise Unauthorized()
    if principal.superseded:  # rule 9: counted here, written to the audit trail in batches
        ctx.grace_uses.count(principal.org_id, principal.credential_id)
    if principal.kind not in accepts:
        raise InsufficientScope()
    if principal.kind in OPAQUE_KINDS:
        await workspace.check_client(ctx, org_id=principal.org_id, client=client)
    return principal


async def _side_by_side(admission: Awaitable[None], check: Awaitable[None]) -> None:
    """Run `admission` in a task while `check` runs here; raise admission's error first.

    The check starts at once in this task (no loop turn's delay for the common case of an
    admission that never waits); the admission task starts on the next turn."""
    admitting = asyncio.ensure_future(admission)
    try:
        await check
    except asyncio.CancelledError:
        admitting.cancel()
        raise
    except Exception:
        await admitting  # its error, if any, is the answer
        raise
    await admitting


async def _opaque_principal(
    ctx: Context, credential: str, kind: CredentialKind
) -> Principal | None:
    """Find an API key or session token: from the cache if not revoked, else the database."""
    secret_hash = credentials.hash_secret(credential)
    known = ctx.credential_cache.get(secret_hash, now=ctx.clock.time())
    if known is not None:
        try:
            revoked = await ctx.revocations.is_revoked(known.credential_id)
        except Unavailable:
            log.warning("revocation store unavailable: the database decides this credential")
        else:
            if not revoked:
                return known
            ctx.credential_cache.forget(secret_hash)
            return None
    principal = await _stored_principal(ctx, credential, kind)
    if principal is not None:
        ctx.credential_cache.put(secret_hash, principal, now=ctx.clock.time())
    return principal


async def _stored_principal(
    ctx: Context, credential: str, kind: CredentialKind
) -> Principal | None:
    if kind == "api_key":
        key = await api_keys.find_by_secret(ctx, credential)
        if key is not None:
            return Principal(kind="api_key", org_id=key.org_id, credential_id=key.id)
        replaced = await api_keys.find_superseded(ctx, credential)  # rule 9
        if replaced is None:
            return None
        return Principal(
            kind="api_key",
            org_id=replaced.org_id,
            credential_id=replaced.key_id,
            expires_at=replaced.valid_until.timestamp(),  # cached no longer than the grace
            superseded=True,
        )
    token = await session_tokens.find_active(ctx, credential)
    if token is None:
        return None
    return Principal(
        kind="session_token",
        org_id=token.org_id,
        credential_id=token.id,
        conversation_ids=token.conversation_ids,
        expires_at=token.expires_at.timestamp(),
    )


async def _conversation_token_principal(
    ctx: Context,
    credential: str,
    *,
    accepts: frozenset[CredentialKind],
    conversation_id: str | None,
) -> Principal:
    """Prove a conversation token by using it up (rule 8)."""
    if "conversation_token" not in accepts or conversation_id is not None:
        raise InsufficientScope()  # before it is used up: the token stays good
    token = await conversation_tokens.redeem_conversation_token(ctx, credential)
    if token is None:
        raise Unauthorized()
    return Principal(
        kind="conversation_token",
        org_id=token.org_id,
        # No secret: a prefix of its SHA-256, naming it in the store's and the logs' terms.
        credential_id="conversation_token:" + credentials.hash_secret(credential)[:16],
        agent_id=token.agent_id,
    )


# --- the carrier: its voice webhook and its media streams ----------------------------


async def authenticate_carrier(
    ctx: Context,
    *,
    query: str,
    params: Sequence[tuple[str, str]],
    signature: str | None,
    path: str = telephony.VOICE_PATH,
) -> CarrierPrincipal:
    """Prove a carrier callback (the voice webhook, or another at `path`) by its
    `X-Twilio-Signature` (rule 6), or raise InvalidCarrierSignature. `query` is the query
    string as sent (without `?`), `params` the decoded form fields in the order sent."""
    account_sid = next((value for name, value in params if name == "AccountSid"), "")
    found = None
    if telephony.ACCOUNT_SID.fullmatch(account_sid):
        async with ctx.db.read() as session:
            found = await telephony_repo.sealed_token_of(session, account_sid)
    auth_token = ctx.secrets.unseal(found[1]) if found else _DUMMY_AUTH_TOKEN
    # The URL the carrier requested: PARLEY_PUBLIC_URL, not the Host a proxy passes on.
    url = ctx.public_url + path + (f"?{query}" if query else "")
    # The HMAC is computed for an unknown account too, so its answer takes as long.
    valid = signature_matches(auth_token, url, params, signature or "")
    if found is None or signature is None or not valid:
        raise InvalidCarrierSignature()
    return CarrierPrincipal(org_id=found[0], account_sid=account_sid)


async def authenticate_stream(
    ctx: Context, *, conversation_id: str, stream_token: str
) -> StreamPrincipal:
    """Prove a media stream by the token of its `start`, using it up (services/telephony.py
    rule 4); raise InvalidStreamToken for a wrong, used, expired or foreign token."""
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
    return StreamPrincipal(principal=principal, conversation=conversation)


# --- the operator's scraper ------------------------------------------------------------


def authenticate_scrape(authorization: Sequence[str], *, token: str | None) -> MetricsPrincipal:
    """Admit a scrape of `/metrics` (rule 7): with `token` set, the request's one
    `Authorization: Bearer` must be it; raise Unauthorized otherwise."""
    if token is None:
        return MetricsPrincipal(token_checked=False)
    if len(authorization) != 1:
        raise Unauthorized()
    scheme, _, given = authorization[0].partition(" ")
    matches = hmac.compare_digest(given.strip().encode(), token.encode())
    if scheme.lower() != "bearer" or not matches:
        raise Unauthorized()
    return MetricsPrincipal(token_checked=True)
