"""Opaque credentials: API keys, session tokens (API.md section 1) and conversation tokens
(section 17).

All are `parley_<kind>_` followed by 43 base64url characters (256 random bits). Only the
SHA-256 of the whole secret is stored: the secrets are high-entropy, so a slow hash adds
nothing, and lookup by hash means no comparison of secrets ever happens in Python.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Literal

CredentialKind = Literal["api_key", "session_token", "conversation_token", "jwt"]

API_KEY_PREFIX = "parley_sk_"
SESSION_TOKEN_PREFIX = "parley_st_"  # noqa: S105 (a public prefix, not a secret)
CONVERSATION_TOKEN_PREFIX = "parley_ct_"  # noqa: S105 (a public prefix, not a secret)
MAX_CREDENTIAL_BYTES = 8 * 1024
"""API.md section 9: a credential of any kind is at most 8 KiB."""

_OPAQUE_SHAPE = re.compile(r"parley_(sk|st|ct)_[A-Za-z0-9_-]{43}")
_OPAQUE_KINDS: dict[str, CredentialKind] = {
    API_KEY_PREFIX: "api_key",
    SESSION_TOKEN_PREFIX: "session_token",
    CONVERSATION_TOKEN_PREFIX: "conversation_token",
}


def new_api_key() -> str:
    """Return a fresh API key secret."""
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def new_session_token() -> str:
    """Return a fresh session token secret."""
    return SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_conversation_token() -> str:
    """Return a fresh conversation token secret."""
    return CONVERSATION_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """Return the hex SHA-256 of a secret: the only form in which secrets are stored."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def last4(secret: str) -> str:
    """Return the last four characters of a secret, shown in listings."""
    return secret[-4:]


def classify(credential: str) -> CredentialKind | None:
    """Tell which kind of credential a string is by its shape, or None if it is none.

    The shape decides only where to look; whether it is valid is decided by a lookup of its
    hash (opaque credentials) or by the JWT verifier.
    """
    if _OPAQUE_SHAPE.fullmatch(credential):
        return _OPAQUE_KINDS[credential[: len(API_KEY_PREFIX)]]
    if "." in credential:
        # Not an opaque credential and dotted: a JWT candidate, which the verifier accepts
        # or refuses with step 1's `invalid_token` (two or four segments included).
        return "jwt"
    return None
