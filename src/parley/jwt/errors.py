"""One error class per outcome of the JWT verification steps (API.md section 7).

    parley.errors.Unauthorized
     ├── InvalidToken ............ steps 1, 4, 8 (generic message: names no key, issuer, URL)
     ├── InvalidSignature ........ step 3
     ├── InvalidAudience ......... step 5
     ├── TokenExpired ............ step 6
     └── TokenNotYetValid ........ step 7
    parley.errors.Forbidden
     ├── IssuerNotRegistered ..... step 2
     └── ConversationIdMismatch .. step 9
    parley.errors.Conflict
     └── JtiReplayed ............. step 11
    parley.errors.InvalidRequest
     └── KeyRejected ............. an unusable static key given on `PUT /v1/auth/jwt` (400)
    parley.errors.JwksUnreachable
     └── JwksFetchError .......... a JWKS fetch failed; its message is safe to show

Step 10 raises `parley.errors.RateLimited` and an unknown key set `parley.errors.JwksUnavailable`.
The messages are the spec's labels (spec section 7), which the API returns verbatim.
"""

from __future__ import annotations

import json
from typing import Final

from parley.errors import Conflict, Forbidden, InvalidRequest, JwksUnreachable, Unauthorized

QUOTE_LIMIT: Final = 80


def quoted(value: object) -> str:
    """Show a token's value in a reason: backticked, JSON unless a string, at most 80 chars."""
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > QUOTE_LIMIT:
        text = text[: QUOTE_LIMIT - 1] + "…"
    return f"`{text}`"


class InvalidToken(Unauthorized):
    """The token is malformed, has badly typed claims or an unacceptable lifetime."""

    code = "invalid_token"
    message = "invalid token"
    detail = ""
    """Which rule of steps 1, 4 or 8 the token broke, in plain words, set by the step that
    refused it: the token checker shows it; the API answers with the label alone."""

    @classmethod
    def because(cls, detail: str) -> InvalidToken:
        """Return the error with its `detail`."""
        error = cls()
        error.detail = detail
        return error


class InvalidSignature(Unauthorized):
    """No registered key fits the token's `kid` and `alg`, or the signature is wrong (step 3)."""

    code = "invalid_signature"
    message = "invalid signature"


class InvalidAudience(Unauthorized):
    """The `aud` claim does not name the registered audience (step 5)."""

    code = "invalid_audience"
    message = "invalid audience"


class TokenExpired(Unauthorized):
    """`exp` plus the 30 s skew tolerance is in the past (step 6)."""

    code = "token_expired"
    message = "token expired"


class TokenNotYetValid(Unauthorized):
    """`nbf` is in the future (step 7)."""

    code = "token_not_yet_valid"
    message = "token not yet valid"


class IssuerNotRegistered(Forbidden):
    """No organization registered the token's `iss` (step 2)."""

    code = "issuer_not_registered"
    message = "issuer not registered"


class ConversationIdMismatch(Forbidden):
    """The token's `conversation_id` is not the conversation accessed (step 9)."""

    code = "conversation_id_mismatch"
    message = "conversation_id mismatch"


class JtiReplayed(Conflict):
    """The (`iss`, `jti`) pair was already used within the token's lifetime (step 11)."""

    code = "jti_replayed"
    message = "jti replayed"


class KeyRejected(InvalidRequest):
    """A static key is unusable: wrong type or curve, too small, private or symmetric."""

    code = "key_rejected"
    message = "The key is not an Ed25519, P-256 or RSA (2048 bits or more) public signing key."


class JwksFetchError(JwksUnreachable):
    """Fetching a JWKS failed; the message says why without echoing the URL or the body."""

    code = "jwks_unreachable"
    message = "The JWKS URL could not be fetched."
