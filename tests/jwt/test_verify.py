"""API.md section 7, steps 1 to 9, as one table: (mutation, error kind, code)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from tests.jwt.kit import (
    AUD,
    ISS,
    NOW,
    ORG,
    OTHER_ISS,
    FrozenClock,
    InMemoryIssuers,
    Signer,
    b64,
    claims_at,
    segment,
)

from parley.errors import Forbidden, ParleyError, Unauthorized
from parley.jwt import (
    Algorithm,
    ConversationIdMismatch,
    IssuerPolicy,
    VerifiedToken,
    check_conversation,
    verify,
)
from parley.jwt._codec import b64url_decode

pytestmark = pytest.mark.anyio

SPEC_LABELS = {
    "invalid_signature": "invalid signature",
    "invalid_audience": "invalid audience",
    "token_expired": "token expired",
    "token_not_yet_valid": "token not yet valid",
    "issuer_not_registered": "issuer not registered",
    "invalid_token": "invalid token",
}


@dataclass
class Ctx:
    signer: Signer
    other: Signer
    issuers: InMemoryIssuers


Mutation = Callable[[Ctx], str]


def claims(**changes: Any) -> Mutation:
    """Change claims (None removes one); signed correctly."""
    return lambda ctx: ctx.signer.token(**changes)


def header(**changes: Any) -> Mutation:
    """Change header members (None removes one); signed correctly."""

    def forge(ctx: Ctx) -> str:
        fields = {k: v for k, v in ctx.signer.header(**changes).items() if v is not None}
        return ctx.signer.sign(fields, claims_at(NOW))

    return forge


def raw(header_text: bytes | None = None, claims_text: bytes | None = None) -> Mutation:
    """Sign exact JSON texts (for duplicates, nesting and non-JSON)."""

    def forge(ctx: Ctx) -> str:
        head = header_text or json.dumps(ctx.signer.header()).encode()
        return ctx.signer.sign(head, claims_text or json.dumps(claims_at(NOW)).encode())

    return forge


def edit(change: Callable[[str], str]) -> Mutation:
    """Edit the compact text of a valid token."""
    return lambda ctx: change(ctx.signer.token())


def with_policy(mutation: Mutation, **policy: Any) -> Mutation:
    """Register ISS with other policy values first."""

    def forge(ctx: Ctx) -> str:
        ctx.issuers.register(ISS, ORG, [ctx.signer.key], **policy)
        return mutation(ctx)

    return forge


def payload_swapped(token: str) -> str:
    head, _, sig = token.split(".")
    return f"{head}.{segment({**claims_at(NOW), 'sub': 'someone-else'})}.{sig}"


def signature_flipped(token: str) -> str:
    head, body, sig = token.split(".")
    return f"{head}.{body}.{'B' if sig[0] == 'A' else 'A'}{sig[1:]}"


DUP_HEADER = b'{"alg":"EdDSA","kid":"eddsa-key-1","alg":"none"}'
DUP_CLAIMS = json.dumps(claims_at(NOW))[:-1].encode() + b',"aud":"evil.example.com"}'

U, F = Unauthorized, Forbidden
TOKEN, SIGNATURE, ISSUER = "invalid_token", "invalid_signature", "issuer_not_registered"
AUDIENCE, EXPIRED, NOT_YET = "invalid_audience", "token_expired", "token_not_yet_valid"


def row(name: str, mutation: Mutation, kind: type[ParleyError], code: str) -> Any:
    return pytest.param(mutation, kind, code, id=name)


def nested(depth: int, opening: bytes, closing: bytes) -> bytes:
    inner = opening * depth + closing * depth
    return json.dumps(claims_at(NOW))[:-1].encode() + b',"x":' + inner + b"}"


TABLE = [
    # step 1: shape, encoding and header
    row("1-over-8KiB", claims(padding="x" * 8200), U, TOKEN),
    row("1-two-segments", edit(lambda t: t.rsplit(".", 1)[0]), U, TOKEN),
    row("1-four-segments", edit(lambda t: t + ".e30"), U, TOKEN),
    row("1-padding", edit(lambda t: t + "=="), U, TOKEN),
    row(
        "1-standard-alphabet",
        edit(lambda t: t.replace("-", "+").replace("_", "/") + "+/"),
        U,
        TOKEN,
    ),
    row("1-whitespace", edit(lambda t: t.replace(".", ". ", 1)), U, TOKEN),
    row("1-non-ascii", edit(lambda t: t + "é"), U, TOKEN),
    row("1-empty", edit(lambda _: ""), U, TOKEN),
    row("1-header-not-json", raw(header_text=b"not json"), U, TOKEN),
    row("1-header-array", raw(header_text=b'["EdDSA"]'), U, TOKEN),
    row("1-claims-not-object", raw(claims_text=b'"a string"'), U, TOKEN),
    row("1-claims-not-utf8", raw(claims_text=b"\xff\xfe{}"), U, TOKEN),
    row("1-duplicate-header-member", raw(header_text=DUP_HEADER), U, TOKEN),
    row("1-duplicate-claim", raw(claims_text=DUP_CLAIMS), U, TOKEN),
    row("1-deep-nesting-arrays", raw(claims_text=nested(2000, b"[", b"]")), U, TOKEN),
    row("1-nesting-17-arrays", raw(claims_text=nested(16, b"[", b"]")), U, TOKEN),
    row("1-nesting-17-objects", raw(claims_text=nested(16, b'{"a":', b"0}")), U, TOKEN),
    row("1-deep-nesting-objects", raw(claims_text=nested(3000, b'{"a":', b"0}")), U, TOKEN),
    row("1-alg-none", header(alg="none"), U, TOKEN),
    row("1-alg-hs256", header(alg="HS256"), U, TOKEN),
    row("1-alg-wrong-case", header(alg="eddsa"), U, TOKEN),
    row("1-alg-array", header(alg=["EdDSA"]), U, TOKEN),
    row("1-alg-missing", header(alg=None), U, TOKEN),
    row("1-kid-missing", header(kid=None), U, TOKEN),
    row("1-kid-empty", header(kid=""), U, TOKEN),
    row("1-kid-number", header(kid=7), U, TOKEN),
    row("1-typ-other", header(typ="JOSE+JSON"), U, TOKEN),
    row("1-crit", header(crit=["exp"]), U, TOKEN),
    row("1-iss-missing", claims(iss=None), U, TOKEN),
    row("1-iss-empty", claims(iss=""), U, TOKEN),
    row("1-iss-array", claims(iss=["x"]), U, TOKEN),
    # step 2: the issuer
    row("2-unknown-iss", claims(iss="https://unknown.example.com"), F, ISSUER),
    row("2-iss-not-exact", claims(iss=ISS + "/"), F, ISSUER),
    row("2-iss-other-case", claims(iss=ISS.upper()), F, ISSUER),
    # step 3: key and signature
    row("3-kid-not-in-set", header(kid="unknown-kid"), U, SIGNATURE),
    row("3-alg-not-fitting-key", header(alg="ES256"), U, SIGNATURE),
    row("3-signature-altered", edit(signature_flipped), U, SIGNATURE),
    row("3-claims-altered", edit(payload_swapped), U, SIGNATURE),
    row("3-signature-empty", edit(lambda t: t.rsplit(".", 1)[0] + "."), U, SIGNATURE),
    row("3-other-orgs-key", lambda ctx: ctx.other.token(), U, SIGNATURE),
    # step 4: claim types
    row("4-aud-missing", claims(aud=None), U, TOKEN),
    row("4-aud-number", claims(aud=7), U, TOKEN),
    row("4-aud-array-with-number", claims(aud=[AUD, 7]), U, TOKEN),
    row("4-sub-missing", claims(sub=None), U, TOKEN),
    row("4-sub-empty", claims(sub=""), U, TOKEN),
    row("4-sub-number", claims(sub=42), U, TOKEN),
    row("4-sub-lone-surrogate", claims(sub="\ud800"), U, TOKEN),
    row("4-conversation-id-missing", claims(conversation_id=None), U, TOKEN),
    row("4-conversation-id-empty", claims(conversation_id=""), U, TOKEN),
    row("4-conversation-id-over-128", claims(conversation_id="c" * 129), U, TOKEN),
    row("4-conversation-id-5000", claims(conversation_id="c" * 5000), U, TOKEN),
    row("4-conversation-id-nul", claims(conversation_id="c\x00"), U, TOKEN),
    row("4-conversation-id-newline", claims(conversation_id="c\n1"), U, TOKEN),
    row("4-conversation-id-slash", claims(conversation_id="a/b"), U, TOKEN),
    row("4-conversation-id-leading-dash", claims(conversation_id="-c1"), U, TOKEN),
    row("4-sub-nul", claims(sub="user\x00"), U, TOKEN),
    row("4-sub-c1-control", claims(sub="user\x85"), U, TOKEN),
    row("4-exp-missing", claims(exp=None), U, TOKEN),
    row("4-exp-numeric-string", claims(exp=str(NOW + 900)), U, TOKEN),
    row("4-exp-bool", claims(exp=True), U, TOKEN),
    row("4-exp-float", claims(exp=NOW + 900.0), U, TOKEN),
    row("4-iat-missing", claims(iat=None), U, TOKEN),
    row("4-iat-string", claims(iat=str(NOW)), U, TOKEN),
    row("4-nbf-string", claims(nbf="0"), U, TOKEN),
    row(
        "4-nbf-null",
        raw(claims_text=json.dumps({**claims_at(NOW), "nbf": None}).encode()),
        U,
        TOKEN,
    ),
    row("4-jti-empty", claims(jti=""), U, TOKEN),
    row("4-jti-over-256", claims(jti="j" * 257), U, TOKEN),
    row("4-jti-number", claims(jti=1), U, TOKEN),
    row("4-jti-required-missing", with_policy(claims(jti=None), require_jti=True), U, TOKEN),
    # step 5: audience
    row("5-aud-other", claims(aud="other.example.com"), U, AUDIENCE),
    row("5-aud-array-without", claims(aud=["a.example.com", "b.example.com"]), U, AUDIENCE),
    row("5-aud-empty-array", claims(aud=[]), U, AUDIENCE),
    row("5-aud-superstring", claims(aud="xparley.example.comx"), U, AUDIENCE),
    # step 6: expiry, 30 s skew
    row("6-expired-31s-ago", claims(iat=NOW - 931, exp=NOW - 31), U, EXPIRED),
    # step 7: not before, no skew
    row("7-nbf-1s-ahead", claims(nbf=NOW + 1), U, NOT_YET),
    # step 8: iat and lifetime
    row("8-iat-31s-ahead", claims(iat=NOW + 31, exp=NOW + 900), U, TOKEN),
    row("8-lifetime-over-max", claims(iat=NOW, exp=NOW + 3601), U, TOKEN),
    row(
        "8-lifetime-over-org-max",
        with_policy(claims(exp=NOW + 601), max_lifetime_seconds=600),
        U,
        TOKEN,
    ),
    # the first failing step decides
    row(
        "order-2-before-3",
        lambda ctx: ctx.other.sign(
            ctx.other.header(), {**claims_at(NOW), "iss": "https://x.example"}
        ),
        F,
        ISSUER,
    ),
    row(
        "order-3-before-4",
        lambda ctx: ctx.other.sign(ctx.signer.header(), {**claims_at(NOW), "exp": "x"}),
        U,
        SIGNATURE,
    ),
    row("order-4-before-6", claims(aud=7, exp=NOW - 100), U, TOKEN),
    row("order-5-before-6", claims(aud="other", exp=NOW - 100), U, AUDIENCE),
    row("order-6-before-7", claims(exp=NOW - 100, nbf=NOW + 100), U, EXPIRED),
    row("order-7-before-8", claims(nbf=NOW + 100, exp=NOW + 9000), U, NOT_YET),
]


@pytest.mark.parametrize(("mutation", "kind", "code"), TABLE)
async def test_verify_step_failure_decides_answer(
    mutation: Mutation,
    kind: type[ParleyError],
    code: str,
    signer: Signer,
    other_signer: Signer,
    issuers: InMemoryIssuers,
    clock: FrozenClock,
) -> None:
    token = mutation(Ctx(signer, other_signer, issuers))
    with pytest.raises(kind) as caught:
        await verify(token, issuers=issuers, clock=clock)
    assert caught.value.code == code
    assert caught.value.message == SPEC_LABELS[code]


@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
async def test_verify_valid_token_returns_claims(
    alg: Algorithm, signers: dict[Algorithm, Signer], issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    verified = await verify(signers[alg].token(nbf=NOW), issuers=issuers, clock=clock)
    assert verified == VerifiedToken(
        org_id=ORG,
        iss=ISS,
        sub="user_42",
        conversation_id="conv-1",
        jti="jti-0001",
        exp=NOW + 900,
        iat=NOW,
        nbf=NOW,
        kid=signers[alg].kid,
        alg=alg,
    )


BOUNDARIES = [
    pytest.param({"iat": NOW - 900, "exp": NOW - 30}, id="6-exp-plus-30s-is-now"),
    pytest.param({"nbf": NOW}, id="7-nbf-is-now"),
    pytest.param({"iat": NOW + 30, "exp": NOW + 900}, id="8-iat-30s-ahead"),
    pytest.param({"iat": NOW, "exp": NOW + 3600}, id="8-lifetime-exactly-max"),
    pytest.param({"aud": ["a.example.com", AUD]}, id="5-aud-array-containing"),
    pytest.param({"jti": None}, id="4-jti-absent-not-required"),
    pytest.param({"jti": "j" * 256}, id="4-jti-256-chars"),
    pytest.param({"sub": "utilisateur-é"}, id="4-sub-non-ascii"),
    pytest.param({"conversation_id": "C" * 128}, id="4-conversation-id-128-chars"),
    pytest.param({"conversation_id": "order:42@shop_a.b-c"}, id="4-conversation-id-punctuation"),
    pytest.param({"sub": "user with spaces"}, id="4-sub-with-spaces"),
    pytest.param({"extra": {"nested": [1, {"deeper": True}]}}, id="1-nested-extra-claim"),
]


@pytest.mark.parametrize("changes", BOUNDARIES)
async def test_verify_boundary_values_accepted(
    changes: dict[str, Any], signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    verified = await verify(signer.token(**changes), issuers=issuers, clock=clock)
    assert verified.org_id == ORG


async def test_verify_typ_absent_accepted(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.sign({"alg": "EdDSA", "kid": signer.kid}, claims_at(NOW))
    assert (await verify(token, issuers=issuers, clock=clock)).kid == signer.kid


async def test_verify_whitespace_around_json_accepted(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    head = b' {"alg": "EdDSA", "kid": "eddsa-key-1"}\n'
    token = signer.sign(head, b"\t" + json.dumps(claims_at(NOW), indent=2).encode())
    assert (await verify(token, issuers=issuers, clock=clock)).sub == "user_42"


async def test_verify_other_issuer_maps_to_its_organization(
    other_signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = other_signer.token(iss=OTHER_ISS)
    assert (await verify(token, issuers=issuers, clock=clock)).org_id != ORG


async def test_verify_es256_der_signature_refused(
    signers: dict[Algorithm, Signer], issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    es = signers["ES256"]
    signing_input = f"{segment(es.header())}.{segment(claims_at(NOW))}"
    der = es.private_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))  # type: ignore[call-arg, arg-type]
    with pytest.raises(Unauthorized) as caught:
        await verify(f"{signing_input}.{b64(der)}", issuers=issuers, clock=clock)
    assert caught.value.code == "invalid_signature"


def test_check_conversation_mismatch_forbidden() -> None:
    verified = VerifiedToken(ORG, ISS, "u", "conv-1", None, NOW, NOW, None, "k", "EdDSA")
    check_conversation(verified, "conv-1")
    with pytest.raises(ConversationIdMismatch) as caught:
        check_conversation(verified, "conv-2")
    assert (caught.value.code, caught.value.message) == (
        "conversation_id_mismatch",
        "conversation_id mismatch",
    )


def test_issuer_policy_defaults_match_api() -> None:
    from parley.jwt import KeySource

    policy = IssuerPolicy(audience=AUD, keys=KeySource(org_id=ORG, jwks_url="https://x"))
    assert (policy.max_lifetime_seconds, policy.require_jti, policy.org_id) == (3600, False, ORG)


ED25519_ORDER = 2**252 + 27742317777372353535851937790883648493
"""L, the order of Ed25519's base point (RFC 8032 section 5.1)."""


def _with_signature(token: str, signature: bytes) -> str:
    head, body, _ = token.split(".")
    return f"{head}.{body}.{b64(signature)}"


@pytest.mark.parametrize("shape", ["s-plus-order", "63-bytes", "65-bytes", "zeros"])
async def test_verify_eddsa_signature_strictly_checked(
    shape: str, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    """RFC 8032 section 5.1.7: S must be below L. S + L satisfies the verification equation
    (a lax verifier accepts it, making a second valid signature of the token); refused."""
    token = signer.token()
    signature = b64url_decode(token.split(".")[2].encode())
    assert (await verify(token, issuers=issuers, clock=clock)).sub == "user_42"
    r, s = signature[:32], int.from_bytes(signature[32:], "little")
    altered = {
        "s-plus-order": r + (s + ED25519_ORDER).to_bytes(32, "little"),
        "63-bytes": signature[:63],
        "65-bytes": signature + b"\0",
        "zeros": bytes(64),
    }[shape]
    with pytest.raises(Unauthorized) as caught:
        await verify(_with_signature(token, altered), issuers=issuers, clock=clock)
    assert caught.value.code == "invalid_signature"
