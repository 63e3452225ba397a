"""JWT verification: API.md section 7, one small function per step, run in order.

| step | function            | failure                                   |
|------|---------------------|-------------------------------------------|
| 1    | parse_token         | InvalidToken (401 invalid_token)          |
| 2    | find_issuer         | IssuerNotRegistered (403)                 |
| 3    | check_signature     | InvalidSignature (401)                    |
| 4    | check_claim_types   | InvalidToken (401)                        |
| 5    | check_audience      | InvalidAudience (401)                     |
| 6    | check_expiry        | TokenExpired (401)                        |
| 7    | check_not_before    | TokenNotYetValid (401)                    |
| 8    | check_lifetime      | InvalidToken (401)                        |
| 9    | check_conversation  | ConversationIdMismatch (403)              |
| 10   | check_rate_limit    | parley.errors.RateLimited (429)           |
| 11   | claim_jti           | JtiReplayed (409)                         |

`verify` runs steps 1 to 8; it does no I/O but through the injected `IssuerResolver` and reads
time only from the injected `Clock`. `admit` runs steps 9 to 11 once the service knows the
conversation accessed. The first failing step decides the answer, and nothing but a
`parley.errors.ParleyError` ever leaves these functions, whatever the token holds.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol, cast

from cryptography.exceptions import InvalidSignature as BadSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from parley.clock import Clock
from parley.errors import RateLimited
from parley.ids import CONVERSATION_ID_RULE, has_control_characters, is_valid_conversation_id
from parley.jwt._codec import MalformedError, b64url_decode, is_text, json_object
from parley.jwt.errors import (
    ConversationIdMismatch,
    InvalidAudience,
    InvalidSignature,
    InvalidToken,
    IssuerNotRegistered,
    JtiReplayed,
    TokenExpired,
    TokenNotYetValid,
    quoted,
)
from parley.jwt.keys import ALGORITHMS, Algorithm, PublicKey, VerificationKey
from parley.jwt.policy import IssuerPolicy
from parley.stores.base import RateLimiter, ReplayGuard

MAX_TOKEN_BYTES: Final = 8192
"""Step 1 and API.md section 9: a credential is at most 8 KiB."""
SKEW_SECONDS: Final = 30
"""Tolerance on `exp` (spec section 5.4 rule 4) and on `iat` in the future (step 8)."""
MAX_JTI_LENGTH: Final = 256


class IssuerResolver(Protocol):
    """The organization data verification needs, injected by the service layer."""

    async def policy(self, iss: str) -> IssuerPolicy | None:
        """Return the policy of the organization that registered `iss`, or None (step 2)."""
        ...

    async def key(self, policy: IssuerPolicy, kid: str, alg: Algorithm) -> VerificationKey | None:
        """Return the one key named `kid` that fits `alg`, refreshing once on a miss (step 3).

        Raise `parley.errors.JwksUnavailable` when the key set itself cannot be had.
        """
        ...


class ParsedToken(NamedTuple):
    """A token that passed step 1; its signature is not checked yet."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    signature: bytes
    alg: Algorithm
    kid: str
    iss: str


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """A token that passed steps 1 to 8: who minted it, for whom and for which conversation."""

    org_id: str
    iss: str
    sub: str
    conversation_id: str
    jti: str | None
    exp: int
    iat: int
    nbf: int | None
    kid: str
    alg: Algorithm


def parse_token(token: object) -> ParsedToken:
    """Step 1: parse the compact JWS (RFC 7515 section 7.1) and its header, strictly."""
    if type(token) is not str:
        raise InvalidToken.because("the token is not text")
    if len(token) > MAX_TOKEN_BYTES:
        reason = f"the token is {len(token)} bytes; at most 8 KiB ({MAX_TOKEN_BYTES}) are accepted"
        raise InvalidToken.because(reason)
    if not token.isascii():
        raise InvalidToken.because("the token holds characters outside ASCII")
    raw = token.encode("ascii")
    segments = raw.split(b".")
    if len(segments) != 3:
        reason = f"a JWT has three dot-separated segments; this one has {len(segments)}"
        raise InvalidToken.because(reason)
    encoded_header, encoded_claims, encoded_signature = segments
    header = _segment_object(encoded_header, "header")
    claims = _segment_object(encoded_claims, "payload")
    try:
        signature = b64url_decode(encoded_signature)
    except MalformedError as error:
        raise InvalidToken.because(
            f"the signature segment is not strict base64url ({error})"
        ) from None
    alg, kid, iss = header.get("alg"), header.get("kid"), claims.get("iss")
    if type(alg) is not str or alg not in ALGORITHMS:
        raise InvalidToken.because(f"alg {quoted(alg)} is not one of {', '.join(ALGORITHMS)}")
    if not is_text(kid):
        raise InvalidToken.because("the header has no kid (a non-empty string)")
    if not is_text(iss):
        raise InvalidToken.because("the payload has no iss (a non-empty string)")
    # RFC 7515 section 4.1.11: no extension is understood, so any `crit` is refused.
    if "crit" in header:
        raise InvalidToken.because("the header has crit: no extension is accepted")
    if header.get("typ", "JWT") != "JWT":
        raise InvalidToken.because(f"typ is {quoted(header.get('typ'))}; it must be JWT or absent")
    signing_input = raw[: len(encoded_header) + 1 + len(encoded_claims)]
    return ParsedToken(header, claims, signing_input, signature, cast(Algorithm, alg), kid, iss)


def _segment_object(encoded: bytes, name: str) -> dict[str, Any]:
    try:
        return json_object(b64url_decode(encoded))
    except MalformedError as error:
        raise InvalidToken.because(
            f"the {name} is not a JSON object in strict base64url ({error}; no padding, "
            "no '+' or '/', no duplicate names)"
        ) from None


async def find_issuer(iss: str, issuers: IssuerResolver) -> IssuerPolicy:
    """Step 2: the exact `iss` string must be registered by an organization."""
    policy = await issuers.policy(iss)
    if policy is None:
        raise IssuerNotRegistered
    return policy


def _eddsa(key: PublicKey, signature: bytes, data: bytes) -> None:
    # libsodium (PyNaCl, PyCA's binding) checks an Ed25519 signature in about 0.4 of the
    # time OpenSSL 3.0 takes through cryptography's wheels (67 µs against 167 here), and as
    # strictly (RFC 8032: S below the group order; small-order keys refused too).
    # cryptography still reads the key (parley/jwt/keys.py) and checks ES256 and RS256.
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise BadSignature
    try:
        _sodium_key(key.public_bytes_raw()).verify(data, signature)
    except BadSignatureError:
        raise BadSignature from None


@functools.lru_cache(maxsize=1024)
def _sodium_key(raw: bytes) -> VerifyKey:
    """libsodium's form of a registered Ed25519 key, made once per key."""
    return VerifyKey(raw)


_ECDSA_SHA256 = ec.ECDSA(hashes.SHA256())
_PKCS1V15 = padding.PKCS1v15()
_SHA256 = hashes.SHA256()


def _es256(key: PublicKey, signature: bytes, data: bytes) -> None:
    # RFC 7518 section 3.4: the signature is R || S, 32 bytes each, not DER.
    if not isinstance(key, ec.EllipticCurvePublicKey) or len(signature) != 64:
        raise BadSignature
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    key.verify(encode_dss_signature(r, s), data, _ECDSA_SHA256)


def _rs256(key: PublicKey, signature: bytes, data: bytes) -> None:
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadSignature
    key.verify(signature, data, _PKCS1V15, _SHA256)


_VERIFIERS: Final[dict[str, Callable[[PublicKey, bytes, bytes], None]]] = {
    "EdDSA": _eddsa,
    "ES256": _es256,
    "RS256": _rs256,
}


async def check_signature(
    token: ParsedToken, policy: IssuerPolicy, issuers: IssuerResolver
) -> VerificationKey:
    """Step 3: `kid` names one registered key fitting `alg`, and the signature verifies.

    Only registered keys are used: `jwk`, `jku`, `x5u` and `x5c` header members are ignored
    (RFC 8725 section 3.10), and the key's own algorithm must equal `alg` (RFC 8725 3.1).
    """
    key = await issuers.key(policy, token.kid, token.alg)
    if key is None or key.alg != token.alg:
        raise InvalidSignature
    try:
        _VERIFIERS[token.alg](key.public_key, token.signature, token.signing_input)
    except (BadSignature, ValueError):
        raise InvalidSignature from None
    return key


def check_claim_types(claims: dict[str, Any], policy: IssuerPolicy) -> None:
    """Step 4: required claims are present and typed (RFC 7519 section 4.1; bools are not ints).

    `conversation_id` also follows the one conversation ID rule of `POST /v1/conversations`
    (`parley.ids.is_valid_conversation_id`), and `sub`, an ID too, holds no control
    character: both are stored, and every database must accept them alike.
    """
    aud = claims.get("aud")
    if type(aud) is not str and not (type(aud) is list and all(type(a) is str for a in aud)):
        raise InvalidToken.because("aud must be a string or an array of strings")
    for name in ("sub", "conversation_id"):
        if not is_text(claims.get(name)):
            raise InvalidToken.because(f"{name} must be a non-empty string")
    if not is_valid_conversation_id(claims["conversation_id"]):
        reason = f"conversation_id {quoted(claims['conversation_id'])}: {CONVERSATION_ID_RULE}"
        raise InvalidToken.because(reason)
    if has_control_characters(claims["sub"]):
        raise InvalidToken.because("sub holds a control character")
    for name in ("exp", "iat"):
        if type(claims.get(name)) is not int:
            raise InvalidToken.because(f"{name} must be an integer (seconds since 1970)")
    if "nbf" in claims and type(claims["nbf"]) is not int:
        raise InvalidToken.because("nbf, when present, must be an integer")
    if "jti" in claims:
        jti = claims["jti"]
        if not is_text(jti) or len(jti) > MAX_JTI_LENGTH:
            reason = f"jti must be a non-empty string of at most {MAX_JTI_LENGTH} characters"
            raise InvalidToken.because(reason)
    elif policy.require_jti:
        raise InvalidToken.because("your settings require a jti, and the token has none")


def check_audience(aud: str | list[str], policy: IssuerPolicy) -> None:
    """Step 5: `aud` equals the registered audience or is an array containing it."""
    if aud != policy.audience and not (type(aud) is list and policy.audience in aud):
        raise InvalidAudience


def check_expiry(exp: int, now: float) -> None:
    """Step 6: now <= exp + 30 s (spec section 5.4 rule 4)."""
    if now > exp + SKEW_SECONDS:
        raise TokenExpired


def check_not_before(nbf: int | None, now: float) -> None:
    """Step 7: a present `nbf` is not in the future; no skew (spec section 5.4 rule 5)."""
    if nbf is not None and nbf > now:
        raise TokenNotYetValid


def check_lifetime(iat: int, exp: int, now: float, policy: IssuerPolicy) -> None:
    """Step 8: `iat` <= now + 30 s and `exp` - `iat` <= the maximum lifetime."""
    if iat > now + SKEW_SECONDS:
        reason = f"iat is {int(iat - now)} s in the future ({SKEW_SECONDS} s of skew allowed)"
        raise InvalidToken.because(reason)
    if exp - iat > policy.max_lifetime_seconds:
        raise InvalidToken.because(
            f"exp - iat is {exp - iat} s; the maximum lifetime is {policy.max_lifetime_seconds} s"
        )


async def verify(token: str, *, issuers: IssuerResolver, clock: Clock) -> VerifiedToken:
    """Run steps 1 to 8 of API.md section 7 and return the verified token.

    Raises the first failing step's error; `JwksUnavailable` (503) when the issuer's key set
    cannot be had at all. Steps 9 to 11 follow in `admit`.
    """
    parsed = parse_token(token)
    policy = await find_issuer(parsed.iss, issuers)
    await check_signature(parsed, policy, issuers)
    claims = parsed.claims
    check_claim_types(claims, policy)
    check_audience(claims["aud"], policy)
    now = clock.time()
    exp, iat, nbf = claims["exp"], claims["iat"], claims.get("nbf")
    check_expiry(exp, now)
    check_not_before(nbf, now)
    check_lifetime(iat, exp, now, policy)
    return VerifiedToken(
        policy.org_id,
        parsed.iss,
        claims["sub"],
        claims["conversation_id"],
        claims.get("jti"),
        exp,
        iat,
        nbf,
        parsed.kid,
        parsed.alg,
    )


def check_conversation(token: VerifiedToken, conversation_id: str) -> None:
    """Step 9: the token's `conversation_id` equals the conversation accessed (rule 6)."""
    if token.conversation_id != conversation_id:
        raise ConversationIdMismatch


def _digest(kind: str, *parts: str) -> str:
    # JSON keeps the parts unambiguous (no separator collisions) and ASCII-safe; hashing keeps
    # the store key short and free of credential material.
    encoded = json.dumps(parts).encode("ascii")
    return f"jwt:{kind}:{hashlib.sha256(encoded).hexdigest()}"


def rate_limit_key(token: VerifiedToken) -> str:
    """Return the step 10 bucket key of (`iss`, `sub`, `conversation_id`) (spec section 8)."""
    return _digest("rate", token.iss, token.sub, token.conversation_id)


def replay_key(token: VerifiedToken) -> str | None:
    """Return the step 11 key of (`iss`, `jti`), or None for a token without `jti`."""
    return None if token.jti is None else _digest("jti", token.iss, token.jti)


async def check_rate_limit(token: VerifiedToken, limiter: RateLimiter) -> None:
    """Step 10: take one request from the (`iss`, `sub`, `conversation_id`) bucket."""
    decision = await limiter.hit(rate_limit_key(token))
    if not decision.allowed:
        raise RateLimited(retry_after=max(1, decision.retry_after))


async def claim_jti(token: VerifiedToken, guard: ReplayGuard) -> None:
    """Step 11: record (`iss`, `jti`) until `exp` + 30 s; a second use is a replay (rule 7)."""
    key = replay_key(token)
    if key is None:
        return
    if not await guard.claim(key, expires_at=token.exp + SKEW_SECONDS, issued_at=token.iat):
        raise JtiReplayed


async def admit(
    token: VerifiedToken,
    *,
    conversation_id: str,
    limiter: RateLimiter,
    replay_guard: ReplayGuard,
) -> None:
    """Run steps 9 to 11 in order, after `verify` and once the conversation accessed is known.

    The `jti` is recorded last, so a refusal by any earlier step (a 429 included) leaves it
    unused (API.md section 7 step 10).
    """
    check_conversation(token, conversation_id)
    await check_rate_limit(token, limiter)
    await claim_jti(token, replay_guard)
