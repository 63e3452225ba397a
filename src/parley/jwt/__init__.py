"""Parley's JWT security kernel: verify customer-signed tokens, cache their keys, mint them.

Verification follows API.md section 7 step by step (`verify` for steps 1 to 8, `admit` for
steps 9 to 11). The kernel does no I/O of its own: issuers, keys, the JWKS HTTP client, the
stores and the clock are injected. Customer backends use `generate_key_pair` and
`mint_token`.
"""

from parley.jwt.cache import (
    CachedIssuerResolver,
    JwksSource,
    KeyCache,
    KeySetStore,
    KeySetView,
    StoredJwks,
)
from parley.jwt.errors import (
    ConversationIdMismatch,
    InvalidAudience,
    InvalidSignature,
    InvalidToken,
    IssuerNotRegistered,
    JtiReplayed,
    JwksFetchError,
    KeyRejected,
    TokenExpired,
    TokenNotYetValid,
)
from parley.jwt.jwks import FetchedJwks, JwksFetcher, is_public_address, parse_max_age
from parley.jwt.keys import (
    ALGORITHMS,
    Algorithm,
    KeySet,
    VerificationKey,
    import_jwk,
    import_pem,
    import_static_key,
    load_jwks,
    public_jwk,
    thumbprint,
)
from parley.jwt.mint import KeyPair, generate_key_pair, load_private_key, mint_token
from parley.jwt.policy import DEFAULT_MAX_LIFETIME_SECONDS, IssuerPolicy, KeySource
from parley.jwt.verify import (
    MAX_TOKEN_BYTES,
    SKEW_SECONDS,
    IssuerResolver,
    VerifiedToken,
    admit,
    check_conversation,
    check_rate_limit,
    claim_jti,
    rate_limit_key,
    replay_key,
    verify,
)

__all__ = [
    "ALGORITHMS",
    "DEFAULT_MAX_LIFETIME_SECONDS",
    "MAX_TOKEN_BYTES",
    "SKEW_SECONDS",
    "Algorithm",
    "CachedIssuerResolver",
    "ConversationIdMismatch",
    "FetchedJwks",
    "InvalidAudience",
    "InvalidSignature",
    "InvalidToken",
    "IssuerNotRegistered",
    "IssuerPolicy",
    "IssuerResolver",
    "JtiReplayed",
    "JwksFetchError",
    "JwksFetcher",
    "JwksSource",
    "KeyCache",
    "KeyPair",
    "KeyRejected",
    "KeySet",
    "KeySetStore",
    "KeySetView",
    "KeySource",
    "StoredJwks",
    "TokenExpired",
    "TokenNotYetValid",
    "VerificationKey",
    "VerifiedToken",
    "admit",
    "check_conversation",
    "check_rate_limit",
    "claim_jti",
    "generate_key_pair",
    "import_jwk",
    "import_pem",
    "import_static_key",
    "is_public_address",
    "load_jwks",
    "load_private_key",
    "mint_token",
    "parse_max_age",
    "public_jwk",
    "rate_limit_key",
    "replay_key",
    "thumbprint",
    "verify",
]
