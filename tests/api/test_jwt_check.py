"""`POST /v1/auth/jwt/check`: the right step for every row of API.md section 7, nothing
spent, nothing of another organization shown, the token never echoed."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from tests.api.helpers import assert_error
from tests.api.test_jwt_auth import AUD, Org, read, register_org
from tests.jwks_server import JwksServer, running_jwks_server
from tests.jwt.kit import NOW, FrozenClock, b64, make_signer, segment

from parley.app import create_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    with running_jwks_server() as server:
        yield server


@pytest.fixture
async def app(settings_factory: Any, clock: FrozenClock) -> AsyncIterator[FastAPI]:
    settings = settings_factory(
        jwks_allow_http=True,
        jwks_allow_private_networks=True,
        public_url=f"https://{AUD}",
        jwt_rate_burst=2,
        jwt_rate_per_minute=1,
    )
    application = create_app(settings, clock=clock)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


@pytest.fixture
async def org(app: FastAPI, jwks: JwksServer) -> AsyncIterator[Org]:
    created = await register_org(app, jwks)
    yield created
    await created.api.aclose()


@pytest.fixture
async def other(app: FastAPI) -> AsyncIterator[Org]:
    created = await register_org(app, None)
    yield created
    await created.api.aclose()


async def check(org: Org, token: str, conversation_id: str | None = "c1") -> dict[str, Any]:
    body: dict[str, Any] = {"token": token}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    response = await org.api.post("/v1/auth/jwt/check", json=body)
    assert response.status_code == 200, response.text
    assert token not in response.text
    found: dict[str, Any] = response.json()
    return found


@dataclass(frozen=True)
class Row:
    """A token built from the organization's valid one; the step and code it must fail."""

    make: Callable[[Org, Org], str]
    step: int
    code: str
    reason: str
    conversation_id: str = "c1"


def forged_header(org: Org, **header: Any) -> str:
    claims = {"iss": org.iss, "aud": AUD, "sub": "u", "conversation_id": "c1"}
    return org.signer.sign(org.signer.header(**header), {**claims, "iat": NOW, "exp": NOW + 60})


ROWS: dict[str, Row] = {
    "1-two-segments": Row(lambda _o, _: "eyJhbGciOiJFZERTQSJ9.e30", 1, "invalid_token", "three"),
    "1-padding": Row(lambda o, _: o.token() + "=", 1, "invalid_token", "base64url"),
    "1-alg-none": Row(lambda o, _: forged_header(o, alg="none"), 1, "invalid_token", "`none`"),
    "1-alg-hs256": Row(lambda o, _: forged_header(o, alg="HS256"), 1, "invalid_token", "HS256"),
    "1-no-kid": Row(lambda o, _: forged_header(o, kid=""), 1, "invalid_token", "no kid"),
    "1-crit": Row(lambda o, _: forged_header(o, crit=["exp"]), 1, "invalid_token", "crit"),
    "1-typ": Row(lambda o, _: forged_header(o, typ="at+jwt"), 1, "invalid_token", "typ"),
    "1-oversize": Row(lambda o, _: o.token(sub="x" * 9000), 1, "invalid_token", "at most 8 KiB"),
    "1-duplicate-claim": Row(
        lambda o, _: o.signer.sign(o.signer.header(), b'{"iss":"a","iss":"b"}'),
        1,
        "invalid_token",
        "duplicate",
    ),
    "2-unknown-issuer": Row(
        lambda o, _: o.token(iss="https://nobody.example"),
        2,
        "issuer_not_registered",
        "not registered for your organization",
    ),
    "2-other-org-issuer": Row(
        lambda _o, other: other.token(),
        2,
        "issuer_not_registered",
        "not registered for your organization",
    ),
    "3-unknown-kid": Row(
        lambda o, _: o.signer.sign(
            o.signer.header(kid="k2"),
            {
                "iss": o.iss,
                "aud": AUD,
                "sub": "u",
                "conversation_id": "c1",
                "iat": NOW,
                "exp": NOW + 60,
            },
        ),
        3,
        "invalid_signature",
        "is not in the JWKS fetched 0 s ago; it holds",
    ),
    "3-wrong-key": Row(
        lambda o, _: make_signer("EdDSA", kid=o.signer.kid).sign(
            o.signer.header(),
            {
                "iss": o.iss,
                "aud": AUD,
                "sub": "u",
                "conversation_id": "c1",
                "iat": NOW,
                "exp": NOW + 60,
            },
        ),
        3,
        "invalid_signature",
        "does not verify",
    ),
    "3-alg-mismatch": Row(
        lambda o, _: forged_header(o, alg="ES256"), 3, "invalid_signature", "for EdDSA"
    ),
    "4-no-sub": Row(lambda o, _: o.token(sub=None), 4, "invalid_token", "sub must be"),
    "4-exp-string": Row(lambda o, _: o.token(exp="soon"), 4, "invalid_token", "exp must be"),
    "4-jti-too-long": Row(lambda o, _: o.token(jti="j" * 257), 4, "invalid_token", "jti"),
    "5-audience": Row(
        lambda o, _: o.token(aud="someone.else"), 5, "invalid_audience", "your audience is"
    ),
    "6-expired": Row(
        lambda o, _: o.token(iat=NOW - 900, exp=NOW - 31), 6, "token_expired", "expired 31 s ago"
    ),
    "7-not-yet-valid": Row(
        lambda o, _: o.token(nbf=NOW + 120), 7, "token_not_yet_valid", "2 min in the future"
    ),
    "8-iat-future": Row(
        lambda o, _: o.token(iat=NOW + 31, exp=NOW + 600), 8, "invalid_token", "iat is 31 s"
    ),
    "8-lifetime": Row(
        lambda o, _: o.token(exp=NOW + 7200), 8, "invalid_token", "maximum lifetime is 3600 s"
    ),
    "9-conversation": Row(
        lambda o, _: o.token(), 9, "conversation_id_mismatch", "not `c2`", conversation_id="c2"
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
async def test_check_token_names_the_failing_step(org: Org, other: Org, row: Row) -> None:
    result = await check(org, row.make(org, other), row.conversation_id)

    assert result["valid"] is False
    assert result["failed_step"] == row.step
    assert result["code"] == row.code
    steps = result["steps"]
    assert [s["status"] for s in steps] == ["passed"] * (row.step - 1) + ["failed"] + [
        "not_run"
    ] * (11 - row.step)
    assert row.reason in steps[row.step - 1]["reason"]


async def test_check_token_other_org_issuer_reveals_nothing(org: Org, other: Org) -> None:
    theirs = await check(org, other.token())
    nobodys = await check(org, org.token(iss=other.iss + ".unregistered"))

    assert other.org_id not in str(theirs)
    assert theirs["steps"][1]["reason"] == (
        f"issuer `{other.iss}` is not registered for your organization"
    )
    assert {k: v for k, v in theirs["steps"][1].items() if k != "reason"} == {
        k: v for k, v in nobodys["steps"][1].items() if k != "reason"
    }
    assert [s["reason"] for s in theirs["steps"][2:]] == [""] * 9


async def test_check_token_unknown_kid_names_the_keys_held(org: Org) -> None:
    token = org.signer.sign(
        org.signer.header(kid="k2"),
        {
            "iss": org.iss,
            "aud": AUD,
            "sub": "u",
            "conversation_id": "c1",
            "iat": NOW,
            "exp": NOW + 60,
        },
    )

    result = await check(org, token)

    assert result["steps"][2]["reason"] == (
        f"kid `k2` is not in the JWKS fetched 0 s ago; it holds `{org.signer.kid}`"
    )


async def test_check_token_valid_spends_nothing(org: Org, http: httpx.AsyncClient) -> None:
    token = org.token(jti=secrets.token_hex(8))
    for _ in range(4):  # more than the burst of 2: the checker charges no rate limit
        result = await check(org, token)
        assert result["valid"] is True
        assert result["failed_step"] is None

    assert [s["status"] for s in result["steps"]] == ["passed"] * 9 + ["skipped"] * 2
    assert "can still be used" in result["steps"][10]["reason"]
    first = await read(http, token)
    assert first.status_code == 200, first.text
    assert_error(await read(http, token), 409, "jti_replayed")


async def test_check_token_without_conversation_skips_step_9(org: Org) -> None:
    result = await check(org, org.token(), conversation_id=None)

    assert result["valid"] is True
    assert result["steps"][8]["status"] == "skipped"


async def test_check_token_needs_api_key(org: Org, http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/auth/jwt/check",
        json={"token": org.token()},
        headers={"Authorization": f"Bearer {org.token()}"},
    )
    assert_error(response, 403, "insufficient_scope")


async def test_check_token_garbage_is_step_1(org: Org) -> None:
    result = await check(org, "not a token")
    assert result["failed_step"] == 1
    assert result["steps"][0]["reason"] == (
        "a JWT has three dot-separated segments; this one has 1"
    )


async def test_check_token_bad_signature_segment(org: Org) -> None:
    head, claims, _ = org.token().split(".")
    result = await check(org, f"{head}.{claims}.{b64(b'x')}+")
    assert result["failed_step"] == 1
    assert segment({"a": 1})  # the kit's encoder is the one the forged tokens use
