"""Customer-side minting: key pairs and tokens that Parley's verifier accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from tests.jwt.kit import AUD, ISS, NOW, ORG, FrozenClock, InMemoryIssuers

from parley.jwt import (
    Algorithm,
    generate_key_pair,
    import_jwk,
    load_private_key,
    mint_token,
    thumbprint,
    verify,
)
from parley.jwt._codec import b64url_decode

pytestmark = pytest.mark.anyio


def decode_segments(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    head, body, signature = token.split(".")
    return (
        json.loads(b64url_decode(head.encode())),
        json.loads(b64url_decode(body.encode())),
        b64url_decode(signature.encode()),
    )


def mint(pem: str, kid: str, **options: Any) -> str:
    return mint_token(
        pem,
        kid=kid,
        iss=ISS,
        aud=AUD,
        sub="user_42",
        conversation_id="conv-1",
        clock=FrozenClock(),
        **options,
    )


@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
async def test_mint_token_verifies_with_published_jwks(alg: Algorithm) -> None:
    pair = generate_key_pair(alg, rsa_bits=2048)
    issuers = InMemoryIssuers()
    issuers.register(ISS, ORG, [import_jwk(pair.jwks["keys"][0])])
    verified = await verify(
        mint(pair.private_key_pem, pair.kid), issuers=issuers, clock=FrozenClock()
    )
    assert (verified.alg, verified.kid, verified.exp - verified.iat) == (alg, pair.kid, 900)


def test_generate_key_pair_kid_is_thumbprint_and_jwks_public() -> None:
    pair = generate_key_pair("ES256")
    (jwk,) = pair.jwks["keys"]
    assert pair.kid == jwk["kid"] == thumbprint(jwk)
    assert (jwk["alg"], jwk["use"], jwk["crv"]) == ("ES256", "sig", "P-256")
    assert "d" not in jwk
    assert pair.private_key_pem.startswith("-----BEGIN PRIVATE KEY-----")


def test_generate_key_pair_rsa_default_is_3072_bits() -> None:
    pair = generate_key_pair("RS256", kid="rsa-1")
    key = load_private_key(pair.private_key_pem)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert (key.key_size, pair.kid) == (3072, "rsa-1")


def test_generate_key_pair_unknown_alg_refused() -> None:
    with pytest.raises(ValueError, match="alg"):
        generate_key_pair("HS256")  # type: ignore[arg-type]


def test_mint_token_header_and_claims() -> None:
    pair = generate_key_pair("EdDSA")
    header, claims, signature = decode_segments(mint(pair.private_key_pem, pair.kid, ttl=600))
    assert header == {"alg": "EdDSA", "kid": pair.kid, "typ": "JWT"}
    assert {k: v for k, v in claims.items() if k != "jti"} == {
        "iss": ISS,
        "aud": AUD,
        "sub": "user_42",
        "conversation_id": "conv-1",
        "iat": NOW,
        "exp": NOW + 600,
    }
    assert len(claims["jti"]) >= 22
    assert len(signature) == 64


def test_mint_token_fresh_jti_each_time() -> None:
    pair = generate_key_pair("EdDSA")
    jtis = {decode_segments(mint(pair.private_key_pem, pair.kid))[1]["jti"] for _ in range(50)}
    assert len(jtis) == 50


def test_mint_token_es256_signature_is_raw_r_s() -> None:
    pair = generate_key_pair("ES256")
    assert len(decode_segments(mint(pair.private_key_pem, pair.kid))[2]) == 64


def test_mint_token_accepts_key_object_explicit_jti_and_extra_claims() -> None:
    pair = generate_key_pair("EdDSA")
    key = load_private_key(pair.private_key_pem.encode())
    token = mint(key, pair.kid, jti="my-jti", extra_claims={"tier": "gold"})  # type: ignore[arg-type]
    claims = decode_segments(token)[1]
    assert (claims["jti"], claims["tier"]) == ("my-jti", "gold")


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"ttl": 0}, "ttl"),
        ({"ttl": -5}, "ttl"),
        ({"extra_claims": {"exp": 1}}, "registered claim"),
        ({"extra_claims": {"sub": "admin"}}, "registered claim"),
    ],
    ids=["ttl-zero", "ttl-negative", "extra-exp", "extra-sub"],
)
def test_mint_token_bad_options_refused(options: dict[str, Any], reason: str) -> None:
    pair = generate_key_pair("EdDSA")
    with pytest.raises(ValueError, match=reason):
        mint(pair.private_key_pem, pair.kid, **options)


def test_load_private_key_p384_refused() -> None:
    pem = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="P-256"):
        load_private_key(pem)


def test_load_private_key_rsa_1024_refused() -> None:
    pem = rsa.generate_private_key(65537, 1024).private_bytes(  # noqa: S505 - refused on purpose
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="2048"):
        load_private_key(pem)
