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

from parley import credentials
from parley.credentials import CredentialKind
from parley.errors import InsufficientScope, MultipleCredentials, Unauthorized
from parley.services import api_keys
from parley.services.context import Context


class InvalidCredential(Unauthorized):
    """A credential too large to be any credential (API.md section 9)."""

    code = "invalid_token"
    message = "The credential is malformed."


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the credential kind, its organization and the credential's ID."""

    kind: CredentialKind
    org_id: str
    credential_id: str

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
        raise InvalidCredential()
    return token


async def authenticate(ctx: Context, credential: str) -> Principal:
    """Resolve a credential to the principal it proves, or raise Unauthorized."""
    kind = credentials.classify(credential)
    if kind == "api_key":
        key = await api_keys.find_by_secret(ctx, credential)
        if key is not None:
            return Principal(kind="api_key", org_id=key.org_id, credential_id=key.id)
    raise Unauthorized()
