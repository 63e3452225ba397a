"""Authentication: from the Authorization header to a Principal (API.md section 1).

Rules:
1. Exactly one credential per request: a second Authorization header is refused (400
   `multiple_credentials`); any scheme but `Bearer` (case-insensitive) or an empty token is
   refused (401 `unauthorized`).
2. A credential of more than 8 KiB is refused (401 `invalid_token`).
3. A missing, malformed, unknown, revoked or expired API key or session token gives the
   same 401 `unauthorized`, with no hint which part was wrong.
4. An opaque credential is found by the SHA-256 of its secret: no secret is ever compared
   in Python, so there is nothing to time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parley import credentials, jwt
from parley.credentials import CredentialKind
from parley.errors import InsufficientScope, MultipleCredentials, Unauthorized
from parley.services import api_keys, session_tokens
from parley.services.context import Context


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the credential kind, its organization and the credential's ID.

    A JWT principal also carries its verified token; a session token its expiry and the
    conversations it is restricted to (None: any).
    """

    kind: CredentialKind
    org_id: str
    credential_id: str
    token: jwt.VerifiedToken | None = None
    conversation_ids: frozenset[str] | None = None
    expires_at: float | None = None

    def may_access(self, conversation_id: str) -> bool:
        """Tell whether this principal may read the conversation (API.md section 1)."""
        if self.kind == "jwt":
            return self.token is not None and self.token.conversation_id == conversation_id
        return self.conversation_ids is None or conversation_id in self.conversation_ids

    def require(self, *kinds: CredentialKind) -> Principal:
        """Return self if this credential's kind may act here, else raise InsufficientScope."""
        if self.kind not in kinds:
            raise InsufficientScope()
        return self


def bearer_credential(header_values: Sequence[str]) -> str:
    """Extract the one bearer credential from the Authorization header values."""
    if not header_values:
        raise Unauthorized()
    if len(header_values) > 1:
        raise MultipleCredentials()
    scheme, _, token = header_values[0].strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        raise Unauthorized()
    if len(token) > credentials.MAX_CREDENTIAL_BYTES:
        raise jwt.InvalidToken()
    return token


async def authenticate(
    ctx: Context, credential: str, *, conversation_id: str | None = None
) -> Principal:
    """Resolve a credential to the principal it proves, or raise.

    `conversation_id` names the conversation the request accesses, if any. A JWT is admitted
    only there (API.md section 7 steps 9 to 11: it must name that conversation, it counts
    against its rate limit and its `jti` is spent); anywhere else a valid JWT is 403
    `insufficient_scope`, and its `jti` is not spent.
    """
    kind = credentials.classify(credential)
    if kind == "api_key":
        key = await api_keys.find_by_secret(ctx, credential)
        if key is not None:
            return Principal(kind="api_key", org_id=key.org_id, credential_id=key.id)
    elif kind == "session_token":
        token = await session_tokens.find_active(ctx, credential)
        if token is not None:
            return Principal(
                kind="session_token",
                org_id=token.org_id,
                credential_id=token.id,
                conversation_ids=token.conversation_ids,
                expires_at=token.expires_at.timestamp(),
            )
    elif kind == "jwt":
        return await _authenticate_jwt(ctx, credential, conversation_id=conversation_id)
    raise Unauthorized()


async def _authenticate_jwt(ctx: Context, token: str, *, conversation_id: str | None) -> Principal:
    verified = await jwt.verify(token, issuers=ctx.jwt.issuers, clock=ctx.clock)
    if conversation_id is None:
        raise InsufficientScope()
    await jwt.admit(
        verified,
        conversation_id=conversation_id,
        limiter=ctx.jwt.rate_limiter,
        replay_guard=ctx.jwt.replay_guard,
    )
    return Principal(
        kind="jwt",
        org_id=verified.org_id,
        credential_id=verified.jti or "",
        token=verified,
        expires_at=float(verified.exp),
    )
