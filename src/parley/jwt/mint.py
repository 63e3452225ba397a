"""The customer's side: make a signing key pair and mint tokens that Parley accepts.

A customer backend keeps the private key, publishes the public JWKS (or registers it as a
static key with `PUT /v1/auth/jwt`, API.md section 7) and mints one short-lived token per
conversation connection:

    >>> from parley.jwt import generate_key_pair, mint_token
    >>> pair = generate_key_pair("EdDSA")
    >>> token = mint_token(
    ...     pair.private_key_pem,
    ...     kid=pair.kid,
    ...     iss="https://backend.example.com",
    ...     aud="parley.example.com",
    ...     sub="user_8d2f",
    ...     conversation_id="support-4711",
    ... )
    >>> token.count(".")
    2

Tokens carry `typ: JWT`, the key's `alg` and `kid`, and the claims of spec section 2:
`iss`, `aud`, `sub`, `conversation_id`, `iat`, `exp` (`iat` + `ttl`, default 15 minutes as
the spec recommends) and a fresh random `jti`, so each token opens one connection only.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from parley.clock import Clock, SystemClock
from parley.ids import has_control_characters
from parley.jwt._codec import b64url_encode, is_text
from parley.jwt.keys import Algorithm, algorithm_for, make_key

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

DEFAULT_TTL_SECONDS: Final = 900
RSA_BITS: Final = 3072
"""Size of generated RSA keys (at least 2048 is accepted; 3072 is NIST's 128-bit level)."""
_RESERVED_CLAIMS = frozenset({"iss", "aud", "sub", "conversation_id", "iat", "exp", "jti"})


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A fresh signing key: the private key as PEM (keep secret) and the JWKS to publish."""

    alg: Algorithm
    kid: str
    private_key_pem: str
    jwks: dict[str, list[dict[str, str]]]


def generate_key_pair(
    alg: Algorithm = "EdDSA", *, kid: str | None = None, rsa_bits: int = RSA_BITS
) -> KeyPair:
    """Generate a key pair for `alg`; `kid` defaults to the RFC 7638 thumbprint of the key.

    `rsa_bits` (RS256 only) must be 2048 to 8192.
    """
    private_key: PrivateKey
    if alg == "EdDSA":
        private_key = ed25519.Ed25519PrivateKey.generate()
    elif alg == "ES256":
        private_key = ec.generate_private_key(ec.SECP256R1())
    elif alg == "RS256":
        private_key = rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    else:
        raise ValueError("alg must be EdDSA, ES256 or RS256")
    public = make_key(private_key.public_key(), kid=kid)
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    return KeyPair(alg=alg, kid=public.kid, private_key_pem=pem, jwks={"keys": [dict(public.jwk)]})


def load_private_key(pem: str | bytes, password: bytes | None = None) -> PrivateKey:
    """Load a PEM private key of a supported type (Ed25519, P-256, RSA >= 2048 bits).

    Raise ValueError for a malformed PEM or an unsupported key type or size.
    """
    data = pem.encode("utf-8") if isinstance(pem, str) else pem
    key = serialization.load_pem_private_key(data, password=password)
    if not isinstance(key, PrivateKey):
        raise ValueError("the key must be Ed25519, P-256 or RSA")
    _algorithm_of(key)  # refuses other curves and small RSA keys
    return key


def _algorithm_of(key: PrivateKey) -> Algorithm:
    # Only the algorithm fit is checked here, not make_key's Ed25519 small-order test: a
    # public key derived from a private one is a multiple of the base point, never of small
    # order, and that pure-Python test cost milliseconds per token minted.
    alg = algorithm_for(key.public_key())
    if alg is None:
        raise ValueError("the key must be Ed25519, P-256 or RSA of 2048 to 4096 bits")
    return alg


def mint_token(
    private_key: PrivateKey | str | bytes,
    *,
    kid: str,
    iss: str,
    aud: str,
    sub: str,
    conversation_id: str,
    ttl: int = DEFAULT_TTL_SECONDS,
    clock: Clock | None = None,
    jti: str | None = None,
    extra_claims: Mapping[str, Any] | None = None,
) -> str:
    """Return a compact JWS (RFC 7515 section 7.1) for one end user and one conversation.

    `private_key` is a `cryptography` private key or its PEM text; the algorithm follows from
    the key (Ed25519: EdDSA, P-256: ES256, RSA: RS256). `ttl` is the lifetime in seconds
    (default 900; Parley refuses more than its maximum, 3600 by default). `jti` defaults to
    a fresh random value (`secrets.token_urlsafe(16)`). `extra_claims` may add claims but not
    replace the ones above. The customer must check, before minting, that `sub` may access
    `conversation_id` (spec section 5.4 rule 8).
    """
    key = load_private_key(private_key) if isinstance(private_key, str | bytes) else private_key
    if ttl <= 0:
        raise ValueError("ttl must be a positive number of seconds")
    extra = dict(extra_claims or {})
    if _RESERVED_CLAIMS & extra.keys():
        raise ValueError("extra_claims may not replace a registered claim")
    if not is_text(kid) or has_control_characters(kid):
        raise ValueError("kid must be a non-empty string without control characters")
    alg = _algorithm_of(key)
    iat = int((clock or SystemClock()).time())
    claims = {
        **extra,
        "iss": iss,
        "aud": aud,
        "sub": sub,
        "conversation_id": conversation_id,
        "iat": iat,
        "exp": iat + ttl,
        "jti": jti if jti is not None else secrets.token_urlsafe(16),
    }
    header = {"alg": alg, "kid": kid, "typ": "JWT"}
    signing_input = f"{_segment(header)}.{_segment(claims)}".encode("ascii")
    return f"{signing_input.decode('ascii')}.{b64url_encode(_sign(key, signing_input))}"


def _segment(value: Mapping[str, Any]) -> str:
    return b64url_encode(json.dumps(value, separators=(",", ":")).encode("utf-8"))


def _sign(key: PrivateKey, data: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")  # RFC 7518 section 3.4
    return key.sign(data, padding.PKCS1v15(), hashes.SHA256())
