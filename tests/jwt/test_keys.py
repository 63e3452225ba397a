"""Key import and export: accepted types, refusals, RFC 7638 thumbprints, JWK sets."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from tests.jwt.kit import Signer, make_signer

from parley.jwt import (
    Algorithm,
    KeyRejected,
    KeySet,
    import_jwk,
    import_pem,
    import_static_key,
    load_jwks,
    public_jwk,
    thumbprint,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
VECTORS: dict[str, list[dict[str, Any]]] = json.loads((FIXTURES / "jwk_vectors.json").read_text())


def cases(group: str) -> list[Any]:
    return [pytest.param(case, id=case["name"]) for case in VECTORS[group]]


@pytest.mark.parametrize("case", cases("thumbprints"))
def test_thumbprint_rfc_vector_matches(case: dict[str, Any]) -> None:
    assert thumbprint(case["jwk"]) == case["thumbprint"]


@pytest.mark.parametrize("case", cases("accepted"))
def test_import_jwk_supported_key_fits_one_alg(case: dict[str, Any]) -> None:
    key = import_jwk(case["jwk"])
    assert key.alg == case["alg"]
    assert key.kid == case["jwk"].get("kid", thumbprint(case["jwk"]))
    assert key.jwk["use"] == "sig"


@pytest.mark.parametrize("case", cases("rejected"))
def test_import_jwk_unusable_key_rejected(case: dict[str, Any]) -> None:
    with pytest.raises(KeyRejected) as caught:
        import_jwk(case["jwk"])
    assert caught.value.code == "key_rejected"


@pytest.mark.parametrize("value", [None, "text", 3, ["kty"]], ids=["null", "str", "int", "list"])
def test_import_jwk_not_an_object_rejected(value: object) -> None:
    with pytest.raises(KeyRejected):
        import_jwk(value)


@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
def test_import_pem_public_key_round_trips_to_jwk(alg: Algorithm) -> None:
    signer = make_signer(alg)
    pem = signer.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    key = import_pem(pem.decode())
    assert key.alg == alg
    assert key.kid == thumbprint(public_jwk(signer.private_key.public_key()))
    assert import_jwk(dict(key.jwk)).public_key == key.public_key


def test_import_pem_pkcs1_rsa_accepted() -> None:
    public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.PKCS1)
    assert import_pem(pem, kid="rsa-1").kid == "rsa-1"


def test_import_pem_rsa_1024_rejected() -> None:
    with pytest.raises(KeyRejected, match="2048"):
        import_pem((FIXTURES / "rsa1024_public.pem").read_text())


def test_import_pem_p384_rejected() -> None:
    public = ec.generate_private_key(ec.SECP384R1()).public_key()
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(KeyRejected, match="P-256"):
        import_pem(pem)


def test_import_pem_private_key_rejected(signer: Signer) -> None:
    with pytest.raises(KeyRejected, match="Private"):
        import_pem(signer.private_pem)


@pytest.mark.parametrize(
    "text", ["", "garbage", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"]
)
def test_import_pem_garbage_rejected(text: str) -> None:
    with pytest.raises(KeyRejected):
        import_pem(text)


def test_import_static_key_accepts_jwk_and_pem(signer: Signer) -> None:
    pem = signer.private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    from_pem = import_static_key(pem.decode())
    from_jwk = import_static_key({k: v for k, v in signer.jwk.items() if k != "kid"})
    assert from_pem.kid == from_jwk.kid == thumbprint(signer.jwk)


def test_import_jwk_private_members_never_exported(signer: Signer) -> None:
    key = import_jwk({**signer.jwk, "x5c": ["ignored"], "ext": True})
    assert set(key.jwk) == {"kty", "crv", "x", "kid", "alg", "use"}


def test_load_jwks_bad_key_skipped_and_logged(
    signers: dict[Algorithm, Signer], caplog: pytest.LogCaptureFixture
) -> None:
    bad = VECTORS["rejected"][0]["jwk"]
    document = {"keys": [signers["EdDSA"].jwk, {**bad, "kid": "weak"}, signers["RS256"].jwk]}
    with caplog.at_level(logging.WARNING, logger="parley.jwt"):
        key_set = load_jwks(document)
    assert [key.kid for key in key_set.keys] == [signers["EdDSA"].kid, signers["RS256"].kid]
    assert "weak" in caplog.text


@pytest.mark.parametrize("document", [None, [], {"keys": {}}, {"keys": "x"}, {}], ids=repr)
def test_load_jwks_without_keys_array_is_empty(document: object) -> None:
    assert len(load_jwks(document)) == 0


def test_load_jwks_reads_at_most_100_keys(signer: Signer) -> None:
    document = {"keys": [{**signer.jwk, "kid": f"k{i}"} for i in range(150)]}
    key_set = load_jwks(document)
    assert len(key_set) == 100
    assert key_set.get("k99", "EdDSA") is not None
    assert key_set.get("k100", "EdDSA") is None


def test_key_set_duplicate_kid_same_alg_is_ambiguous() -> None:
    first, second = make_signer("EdDSA", "same"), make_signer("EdDSA", "same")
    assert KeySet([first.key, second.key]).get("same", "EdDSA") is None


def test_key_set_same_kid_other_alg_fits_alg(signers: dict[Algorithm, Signer]) -> None:
    ed = import_jwk({**signers["EdDSA"].jwk, "kid": "shared"})
    es = import_jwk({**signers["ES256"].jwk, "kid": "shared"})
    key_set = KeySet([ed, es])
    assert key_set.get("shared", "EdDSA") is ed
    assert key_set.get("shared", "ES256") is es
    assert key_set.get("shared", "RS256") is None


def test_key_set_to_jwks_round_trips(signers: dict[Algorithm, Signer]) -> None:
    key_set = KeySet(signer.key for signer in signers.values())
    again = load_jwks(json.loads(json.dumps(key_set.to_jwks())))
    assert [k.kid for k in again.keys] == [k.kid for k in key_set.keys]


def test_public_jwk_ed25519_has_only_public_members() -> None:
    jwk = public_jwk(ed25519.Ed25519PrivateKey.generate().public_key())
    assert set(jwk) == {"kty", "crv", "x"}
