"""Public signing keys: JWK and PEM import, the alg-key fit, RFC 7638 thumbprints, JWK export.

Policy (API.md section 7, "Keys must be Ed25519, P-256 or RSA of at least 2048 bits"):

- accepted: OKP/Ed25519 for `EdDSA`, EC/P-256 for `ES256`, RSA of 2048..8192 bits for `RS256`
  (RFC 8037 section 2, RFC 7518 sections 6.2 and 6.3); each key fits exactly one algorithm;
- refused: private members (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`), symmetric keys (`oct`,
  `k`), `use` other than `sig`, `key_ops` without `verify`, an `alg` member that does not fit
  the key, other curves, Ed25519 small-order or non-canonical points, malformed base64url;
- a key without `kid` gets its RFC 7638 thumbprint as `kid`;
- a JWK set skips each unusable key with a log line, so one bad key never breaks the set.

Keys are parsed once into `cryptography` objects; verification reuses them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, cast, get_args

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from parley.ids import has_control_characters
from parley.jwt._codec import MalformedError, b64url_decode, b64url_encode, is_text
from parley.jwt._ed25519 import is_weak_public_key
from parley.jwt.errors import KeyRejected

logger = logging.getLogger("parley.jwt")

Algorithm = Literal["EdDSA", "ES256", "RS256"]
ALGORITHMS: Final[frozenset[str]] = frozenset(get_args(Algorithm))
"""The only accepted `alg` values (API.md section 7 step 1; spec section 5.3)."""

PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey

MIN_RSA_BITS: Final = 2048
MAX_RSA_BITS: Final = 8192
"""Larger RSA moduli are refused: they cost verification time and no one needs them."""
MAX_KEYS_PER_SET: Final = 100
"""Keys beyond this many in one JWK set are ignored (logged), bounding the parse work."""

_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")
_THUMBPRINT_MEMBERS = {
    "OKP": ("crv", "kty", "x"),
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
}


@dataclass(frozen=True, slots=True, eq=False)
class VerificationKey:
    """A usable public key: its `kid`, the one algorithm it fits, and the parsed key object."""

    kid: str
    alg: Algorithm
    public_key: PublicKey
    jwk: Mapping[str, str]
    """The public JWK (with `kid`, `alg` and `use`), read-only."""

    @property
    def kty(self) -> str:
        """The JWK key type: `OKP`, `EC` or `RSA`."""
        return self.jwk["kty"]


class KeySet:
    """An organization's usable keys, indexed by (`kid`, `alg`) for step 3 of API.md section 7.

    A (`kid`, `alg`) pair named by two keys is ambiguous and finds nothing: the step needs
    `kid` to name exactly one key that fits `alg`.
    """

    __slots__ = ("_index", "keys")

    def __init__(self, keys: Iterable[VerificationKey] = ()) -> None:
        self.keys: tuple[VerificationKey, ...] = tuple(keys)
        index: dict[tuple[str, str], VerificationKey | None] = {}
        for key in self.keys:
            slot = (key.kid, key.alg)
            index[slot] = None if slot in index else key
        self._index = index

    def get(self, kid: str, alg: str) -> VerificationKey | None:
        """Return the one key named `kid` that fits `alg`, or None."""
        return self._index.get((kid, alg))

    def __len__(self) -> int:
        return len(self.keys)

    def to_jwks(self) -> dict[str, list[dict[str, str]]]:
        """Export the set as a public JWKS document (RFC 7517 section 5)."""
        return {"keys": [dict(key.jwk) for key in self.keys]}


def algorithm_for(public_key: object) -> Algorithm | None:
    """Return the one algorithm `public_key` fits, or None if it fits none (step 3 fit)."""
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return "EdDSA"
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        return "ES256" if isinstance(public_key.curve, ec.SECP256R1) else None
    if isinstance(public_key, rsa.RSAPublicKey):
        return "RS256" if MIN_RSA_BITS <= public_key.key_size <= MAX_RSA_BITS else None
    return None


def public_jwk(public_key: PublicKey) -> dict[str, str]:
    """Return the required public members of `public_key` as a JWK (RFC 7517, RFC 8037)."""
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw)}
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        numbers = public_key.public_numbers()
        return {
            "kty": "EC",
            "crv": "P-256",
            "x": b64url_encode(numbers.x.to_bytes(32, "big")),
            "y": b64url_encode(numbers.y.to_bytes(32, "big")),
        }
    rsa_numbers = public_key.public_numbers()
    return {"kty": "RSA", "n": _uint_b64(rsa_numbers.n), "e": _uint_b64(rsa_numbers.e)}


def thumbprint(jwk: Mapping[str, Any]) -> str:
    """Return the RFC 7638 SHA-256 thumbprint of a public JWK, base64url encoded (section 3)."""
    members = _THUMBPRINT_MEMBERS[jwk["kty"]]
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return b64url_encode(hashlib.sha256(canonical.encode("utf-8")).digest())


def make_key(public_key: object, *, kid: str | None = None) -> VerificationKey:
    """Wrap a `cryptography` public key; refuse it unless it fits one accepted algorithm."""
    alg = algorithm_for(public_key)
    if alg is None:
        raise KeyRejected(_refusal(public_key))
    public_key = cast(PublicKey, public_key)  # algorithm_for accepts only these types
    jwk = public_jwk(public_key)
    if alg == "EdDSA" and is_weak_public_key(b64url_decode(jwk["x"].encode("ascii"))):
        raise KeyRejected("The Ed25519 key is a small-order or non-canonical point.")
    if kid is not None and (not is_text(kid) or has_control_characters(kid)):
        raise KeyRejected("The key's kid must be a non-empty string without control characters.")
    kid = kid or thumbprint(jwk)
    jwk.update(kid=kid, alg=alg, use="sig")
    return VerificationKey(kid=kid, alg=alg, public_key=public_key, jwk=MappingProxyType(jwk))


NOT_A_KEY = (
    'This object is not a JWK (it has no "kty"). A JWKS such as the jwks.json of '
    '`parley keys generate` is a set: pass the entries of its "keys", or the set itself.'
)


def import_jwk(jwk: object) -> VerificationKey:
    """Import one public JWK (RFC 7517 section 4); raise KeyRejected if it is unusable."""
    if not isinstance(jwk, Mapping):
        raise KeyRejected("A JWK must be a JSON object.")
    if any(member in jwk for member in _PRIVATE_MEMBERS):
        raise KeyRejected("Private or symmetric key material is refused: give the public key.")
    if jwk.get("use", "sig") != "sig":
        raise KeyRejected('The key\'s "use" must be "sig".')
    ops = jwk.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        raise KeyRejected('The key\'s "key_ops" must include "verify".')
    kid = jwk.get("kid")
    if kid is not None and (not is_text(kid) or has_control_characters(kid)):
        raise KeyRejected("The key's kid must be a non-empty string without control characters.")
    try:
        public_key = _public_key_of(jwk)
    except (MalformedError, ValueError, TypeError, UnicodeEncodeError) as exc:
        raise KeyRejected("The JWK's key members are malformed.") from exc
    key = make_key(public_key, kid=kid)
    if jwk.get("alg", key.alg) != key.alg:
        raise KeyRejected(f"This key can only be used with alg {key.alg}.")
    return key


def import_pem(pem: str | bytes, *, kid: str | None = None) -> VerificationKey:
    """Import a PEM public key (SubjectPublicKeyInfo or PKCS#1 RSA); refuse private keys."""
    data = pem.encode("utf-8", "replace") if isinstance(pem, str) else pem
    if b"PRIVATE KEY" in data:
        raise KeyRejected("Private keys are refused: give the public key.")
    try:
        public_key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise KeyRejected("The PEM text is not a public key.") from exc
    return make_key(public_key, kid=kid)


def import_static_key(value: object) -> VerificationKey:
    """Import a static key as given to `PUT /v1/auth/jwt`: a JWK object or a PEM string."""
    if isinstance(value, str):
        return import_pem(value)
    return import_jwk(value)


def load_jwks(document: object) -> KeySet:
    """Build a KeySet from a JWKS document, skipping (and logging) every unusable key."""
    entries = document.get("keys") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        logger.warning("jwks document without a keys array: no keys loaded")
        return KeySet()
    if len(entries) > MAX_KEYS_PER_SET:
        logger.warning(
            "jwks has %d keys: only the first %d are read", len(entries), MAX_KEYS_PER_SET
        )
    keys: list[VerificationKey] = []
    for position, entry in enumerate(entries[:MAX_KEYS_PER_SET]):
        try:
            keys.append(import_jwk(entry))
        except KeyRejected as exc:
            kid = entry.get("kid") if isinstance(entry, Mapping) else None
            logger.warning("jwks key %d (kid %r) skipped: %s", position, kid, exc.message)
    return KeySet(keys)


def _public_key_of(jwk: Mapping[str, Any]) -> object:
    kty = jwk.get("kty")
    if kty == "OKP":
        if jwk.get("crv") != "Ed25519":
            raise KeyRejected("OKP keys must use the Ed25519 curve.")
        x = _member(jwk, "x")
        if len(x) != 32:
            raise KeyRejected("An Ed25519 key must be 32 bytes.")
        if is_weak_public_key(x):
            raise KeyRejected("The Ed25519 key is a small-order or non-canonical point.")
        return ed25519.Ed25519PublicKey.from_public_bytes(x)
    if kty == "EC":
        if jwk.get("crv") != "P-256":
            raise KeyRejected("EC keys must use the P-256 curve.")
        x, y = _member(jwk, "x"), _member(jwk, "y")
        if len(x) != 32 or len(y) != 32:  # full length: RFC 7518 section 6.2.1.2
            raise KeyRejected("P-256 coordinates must be 32 bytes each.")
        return ec.EllipticCurvePublicNumbers(
            int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1()
        ).public_key()
    if kty == "RSA":
        n, e = _member(jwk, "n"), _member(jwk, "e")
        if len(n) * 8 > MAX_RSA_BITS + 8 or len(e) > 8:
            raise KeyRejected(f"RSA keys must have {MIN_RSA_BITS} to {MAX_RSA_BITS} bits.")
        return rsa.RSAPublicNumbers(int.from_bytes(e, "big"), int.from_bytes(n, "big")).public_key()
    if kty == "oct":
        raise KeyRejected("Private or symmetric key material is refused: give the public key.")
    if kty is None:
        raise KeyRejected(NOT_A_KEY)
    raise KeyRejected("Keys must be Ed25519 (OKP), P-256 (EC) or RSA.")


def _member(jwk: Mapping[str, Any], name: str) -> bytes:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise MalformedError(f"missing {name}")
    return b64url_decode(value.encode("ascii"))


def _uint_b64(value: int) -> str:
    return b64url_encode(value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))


def _refusal(public_key: object) -> str:
    if isinstance(public_key, rsa.RSAPublicKey):
        return f"RSA keys must have {MIN_RSA_BITS} to {MAX_RSA_BITS} bits."
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        return "EC keys must use the P-256 curve."
    return "Keys must be Ed25519, P-256 or RSA (2048 bits or more)."
