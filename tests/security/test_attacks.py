"""One named test per known JWT attack (STYLE convention 14; RFC 8725 section 2)."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from tests.jwt.kit import (
    ISS,
    NOW,
    FrozenClock,
    InMemoryIssuers,
    Signer,
    b64,
    claims_at,
    make_signer,
    segment,
)

from parley.errors import ParleyError, RateLimited
from parley.jwt import (
    ConversationIdMismatch,
    InvalidSignature,
    InvalidToken,
    IssuerNotRegistered,
    JtiReplayed,
    KeyRejected,
    admit,
    import_jwk,
    verify,
)
from parley.stores.memory import MemoryRateLimiter, MemoryReplayGuard

pytestmark = pytest.mark.anyio


async def refused(token: object, issuers: InMemoryIssuers, clock: FrozenClock) -> ParleyError:
    with pytest.raises(ParleyError) as caught:
        await verify(token, issuers=issuers, clock=clock)  # type: ignore[arg-type]
    return caught.value


def unsigned(header: dict[str, Any], claims: dict[str, Any], signature: str = "") -> str:
    return f"{segment(header)}.{segment(claims)}.{signature}"


@pytest.mark.parametrize("alg", ["none", "None", "NONE", "nOnE"])
async def test_alg_none_refused(alg: str, issuers: InMemoryIssuers, clock: FrozenClock) -> None:
    token = unsigned({"alg": alg, "kid": "eddsa-key-1"}, claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


@pytest.mark.parametrize("material", ["pem", "raw-x"])
async def test_hs256_signed_with_public_key_bytes_refused(
    material: str, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    public = signer.private_key.public_key()
    secret = (
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        if material == "pem"
        else public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    signing_input = f"{segment(signer.header(alg='HS256'))}.{segment(claims_at(NOW))}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    error = await refused(f"{signing_input}.{b64(mac)}", issuers, clock)
    assert isinstance(error, InvalidToken)


async def test_rs256_header_on_ed25519_key_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    forger = make_signer("RS256", signer.kid)  # the attacker's RSA key, the victim's kid
    token = forger.sign(forger.header(), claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidSignature)


async def test_es256_header_on_rsa_key_refused(
    signers: dict[str, Signer], issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    forger = make_signer("ES256", signers["RS256"].kid)
    token = forger.sign(forger.header(), claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidSignature)


async def test_kid_not_in_set_refused_after_one_lookup(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.sign(signer.header(kid="rotated-away"), claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidSignature)
    assert issuers.misses == 1


async def test_token_signed_by_other_orgs_key_refused(
    attacker: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    # The attacker's organization registered the same kid; the token names the victim's iss.
    token = attacker.sign(attacker.header(), claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidSignature)


async def test_oversize_token_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.token(padding="x" * 8192)
    assert len(token) > 8192
    assert isinstance(await refused(token, issuers, clock), InvalidToken)
    assert issuers.misses == 0  # refused before any lookup


@pytest.mark.parametrize("crit", [["b64"], ["exp"], [], "b64"])
async def test_crit_header_refused(
    crit: object, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.sign(signer.header(crit=crit, b64=False), claims_at(NOW))
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


@pytest.mark.parametrize("member", ["jwk", "jku", "x5u", "x5c"])
async def test_key_material_in_header_ignored(
    member: str, attacker: Signer, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    values = {
        "jwk": attacker.jwk,
        "jku": "https://attacker.example/jwks.json",
        "x5u": "https://attacker.example/cert.pem",
        "x5c": ["MIIBattacker"],
    }
    forged = attacker.sign(signer.header(**{member: values[member]}), claims_at(NOW))
    assert isinstance(await refused(forged, issuers, clock), InvalidSignature)
    genuine = signer.sign(signer.header(**{member: values[member]}), claims_at(NOW))
    assert (await verify(genuine, issuers=issuers, clock=clock)).kid == signer.kid


@pytest.mark.parametrize("where", ["header", "claims"])
async def test_deeply_nested_json_refused(
    where: str, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    deep = b'{"x":' * 3000 + b"1" + b"}" * 3000
    header = deep if where == "header" else json.dumps(signer.header()).encode()
    claims = deep if where == "claims" else json.dumps(claims_at(NOW)).encode()
    assert isinstance(await refused(signer.sign(header, claims), issuers, clock), InvalidToken)


@pytest.mark.parametrize(
    ("header", "claims"),
    [
        (b'{"alg":"EdDSA","kid":"eddsa-key-1","kid":"other"}', None),
        (None, b'{"iss":"%s","aud":"parley.example.com","aud":"evil"}' % ISS.encode()),
        (None, b'{"iss":"https://other.example.net","iss":"%s"}' % ISS.encode()),
    ],
    ids=["header-kid", "claims-aud", "claims-iss"],
)
async def test_duplicate_members_refused(
    header: bytes | None,
    claims: bytes | None,
    signer: Signer,
    issuers: InMemoryIssuers,
    clock: FrozenClock,
) -> None:
    token = signer.sign(header or json.dumps(signer.header()).encode(), claims or b"{}")
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


@pytest.mark.parametrize(
    "exp",
    [str(NOW + 900), True, float(NOW + 900), None, [NOW + 900], {"t": NOW}],
    ids=["numeric-string", "bool", "float", "null", "array", "object"],
)
async def test_exp_of_wrong_type_refused(
    exp: object, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.sign(signer.header(), {**claims_at(NOW), "exp": exp})
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


@pytest.mark.parametrize(
    "exp_text",
    [b"1" * 5000, b"1" + b"0" * 300, b"1e400", b"NaN", b"Infinity", b"-Infinity"],
    ids=["5000-digits", "10^300", "1e400", "NaN", "Infinity", "-Infinity"],
)
async def test_huge_or_non_finite_exp_refused(
    exp_text: bytes, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    claims = json.dumps(claims_at(NOW))[:-1].encode().replace(b'"exp": ', b'"exp0": ')
    token = signer.sign(signer.header(), claims + b', "exp": ' + exp_text + b"}")
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


async def test_exp_iat_too_long_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = signer.token(iat=NOW - 10, exp=NOW + 3600)  # valid now, but a 3610 s lifetime
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s + "=",
        lambda s: s + "==",
        lambda s: s.replace("_", "/").replace("-", "+") + "/+",
        lambda s: s[:10] + "\n" + s[10:],
        lambda s: s[:10] + "%3D" + s[10:],
    ],
    ids=["padding-1", "padding-2", "standard-alphabet", "newline", "percent-encoded"],
)
@pytest.mark.parametrize("part", [0, 1, 2], ids=["header", "claims", "signature"])
async def test_non_strict_base64url_refused(
    mangle: Any, part: int, signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    parts = signer.token().split(".")
    parts[part] = mangle(parts[part])
    assert isinstance(await refused(".".join(parts), issuers, clock), InvalidToken)


async def test_signature_with_nonzero_spare_bits_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    # 64 bytes encode to 86 chars with 4 spare bits: flipping one gives the same bytes.
    head, body, signature = signer.token().split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = signature[:-1] + alphabet[alphabet.index(signature[-1]) ^ 1]
    assert isinstance(await refused(f"{head}.{body}.{twin}", issuers, clock), InvalidToken)


async def test_es256_zero_signature_refused(
    signers: dict[str, Signer], issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    # CVE-2022-21449 ("psychic signatures"): r = s = 0 must never verify.
    es = signers["ES256"]
    token = unsigned(es.header(), claims_at(NOW), b64(bytes(64)))
    assert isinstance(await refused(token, issuers, clock), InvalidSignature)


async def test_small_order_ed25519_key_cannot_be_registered() -> None:
    identity = {"kty": "OKP", "crv": "Ed25519", "x": b64(bytes([1]) + bytes(31))}
    with pytest.raises(KeyRejected):
        import_jwk(identity)


@pytest.mark.parametrize("token", [None, 42, b"a.b.c", ["a", "b", "c"]], ids=repr)
async def test_token_not_a_string_refused(
    token: object, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    assert isinstance(await refused(token, issuers, clock), InvalidToken)


async def test_unregistered_issuer_refused_before_key_lookup(
    attacker: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    token = attacker.token(iss="https://evil.example")
    assert isinstance(await refused(token, issuers, clock), IssuerNotRegistered)
    assert issuers.misses == 0


async def test_conversation_swap_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    verified = await verify(signer.token(), issuers=issuers, clock=clock)
    with pytest.raises(ConversationIdMismatch):
        await admit(
            verified,
            conversation_id="conv-2",
            limiter=MemoryRateLimiter(60, 20, clock),
            replay_guard=MemoryReplayGuard(clock),
        )


async def test_jti_replay_refused(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    guard, limiter = MemoryReplayGuard(clock), MemoryRateLimiter(60, 20, clock)
    token = signer.token()
    for attempt in range(2):
        verified = await verify(token, issuers=issuers, clock=clock)
        if attempt == 0:
            await admit(verified, conversation_id="conv-1", limiter=limiter, replay_guard=guard)
        else:
            with pytest.raises(JtiReplayed):
                await admit(verified, conversation_id="conv-1", limiter=limiter, replay_guard=guard)


async def test_rate_limited_request_does_not_use_jti(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    guard, limiter = MemoryReplayGuard(clock), MemoryRateLimiter(60, 1, clock)
    first = await verify(signer.token(jti="a"), issuers=issuers, clock=clock)
    await admit(first, conversation_id="conv-1", limiter=limiter, replay_guard=guard)
    second = await verify(signer.token(jti="b"), issuers=issuers, clock=clock)
    with pytest.raises(RateLimited) as caught:
        await admit(second, conversation_id="conv-1", limiter=limiter, replay_guard=guard)
    assert caught.value.retry_after is not None
    assert caught.value.retry_after >= 1
    clock.advance(2)
    await admit(second, conversation_id="conv-1", limiter=limiter, replay_guard=guard)


async def test_fuzzed_tokens_raise_only_parley_errors(
    signer: Signer, issuers: InMemoryIssuers, clock: FrozenClock
) -> None:
    rng = random.Random(7638)
    valid = signer.token()
    values: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], {}, [1], {"a": None}, 10**30]
    for _ in range(1500):
        choice = rng.randrange(4)
        if choice == 0:  # flip characters anywhere
            chars = list(valid)
            for _ in range(rng.randint(1, 4)):
                chars[rng.randrange(len(chars))] = chr(rng.randrange(32, 0x2FF))
            token = "".join(chars)
        elif choice == 1:  # truncate or duplicate
            cut = rng.randrange(len(valid))
            token = valid[:cut] if rng.random() < 0.5 else valid[:cut] + valid[cut - 5 :]
        else:  # any member, any value, signed correctly
            header, claims = signer.header(), claims_at(NOW)
            target = header if choice == 2 else claims
            target[rng.choice([*target, "crit", "nbf"])] = rng.choice(values)
            token = signer.sign(header, claims)
        try:
            await verify(token, issuers=issuers, clock=clock)
        except ParleyError:
            pass
