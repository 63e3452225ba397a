"""Building blocks for JWT tests: a frozen clock, signers that forge any token, an issuer table.

Shared by tests/jwt and tests/security. Tokens are forged with `cryptography` directly (not
with `mint_token`) so a test can put anything in the header, the claims or the raw segments.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from parley.jwt import (
    Algorithm,
    IssuerPolicy,
    KeySet,
    KeySource,
    VerificationKey,
    import_jwk,
    public_jwk,
)

NOW = 1_700_000_000
ISS = "https://backend.example.com"
AUD = "parley.example.com"
ORG = "org_00000000000000000000000000000001"
OTHER_ISS = "https://other.example.net"
OTHER_ORG = "org_00000000000000000000000000000002"

PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class FrozenClock:
    """A Clock that stands still until a test moves it with `advance`."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self._monotonic = 1_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._monotonic += seconds


def b64(data: bytes) -> str:
    """Encode base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def segment(value: Mapping[str, Any] | bytes) -> str:
    """Encode a header or claim set; bytes are taken as the exact JSON text."""
    raw = value if isinstance(value, bytes) else json.dumps(value).encode("utf-8")
    return b64(raw)


def new_private_key(alg: Algorithm) -> PrivateKey:
    if alg == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    if alg == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def raw_signature(key: PrivateKey, data: bytes) -> bytes:
    """Sign as JWS does: Ed25519, ES256 as r||s (RFC 7518 section 3.4), RS256 PKCS#1 v1.5."""
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return key.sign(data, padding.PKCS1v15(), hashes.SHA256())


@dataclass
class Signer:
    """One private key and its registered public key; forges tokens with it."""

    alg: Algorithm
    kid: str
    private_key: PrivateKey

    @property
    def jwk(self) -> dict[str, str]:
        return {**public_jwk(self.private_key.public_key()), "kid": self.kid, "alg": self.alg}

    @property
    def key(self) -> VerificationKey:
        return import_jwk(self.jwk)

    @property
    def private_pem(self) -> str:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode("ascii")

    def header(self, **changes: Any) -> dict[str, Any]:
        return {"alg": self.alg, "kid": self.kid, "typ": "JWT", **changes}

    def sign(self, header: Mapping[str, Any] | bytes, claims: Mapping[str, Any] | bytes) -> str:
        """Return a compact JWS of exactly this header and claim text, signed by this key."""
        signing_input = f"{segment(header)}.{segment(claims)}"
        signature = raw_signature(self.private_key, signing_input.encode("ascii"))
        return f"{signing_input}.{b64(signature)}"

    def token(self, **claim_changes: Any) -> str:
        """Return a valid token at NOW, with some claims changed (None removes one)."""
        claims = {k: v for k, v in {**claims_at(NOW), **claim_changes}.items() if v is not None}
        return self.sign(self.header(), claims)


def make_signer(alg: Algorithm, kid: str | None = None) -> Signer:
    return Signer(alg=alg, kid=kid or f"{alg.lower()}-key-1", private_key=new_private_key(alg))


def claims_at(now: int) -> dict[str, Any]:
    """Claims that pass every step at `now`, for ISS and AUD."""
    return {
        "iss": ISS,
        "aud": AUD,
        "sub": "user_42",
        "conversation_id": "conv-1",
        "iat": now,
        "exp": now + 900,
        "jti": "jti-0001",
    }


@dataclass
class InMemoryIssuers:
    """An IssuerResolver over dicts; counts key look-ups that found nothing ("misses")."""

    policies: dict[str, IssuerPolicy] = field(default_factory=dict)
    key_sets: dict[str, KeySet] = field(default_factory=dict)
    misses: int = 0

    def register(
        self,
        iss: str,
        org_id: str,
        keys: list[VerificationKey],
        *,
        max_lifetime_seconds: int = 3600,
        require_jti: bool = False,
    ) -> None:
        static = tuple(dict(key.jwk) for key in keys)
        self.policies[iss] = IssuerPolicy(
            audience=AUD,
            keys=KeySource(org_id=org_id, static_keys=static),
            max_lifetime_seconds=max_lifetime_seconds,
            require_jti=require_jti,
        )
        self.key_sets[org_id] = KeySet(keys)

    async def policy(self, iss: str) -> IssuerPolicy | None:
        return self.policies.get(iss)

    async def key(self, policy: IssuerPolicy, kid: str, alg: Algorithm) -> VerificationKey | None:
        found = self.key_sets[policy.org_id].get(kid, alg)
        self.misses += found is None
        return found
