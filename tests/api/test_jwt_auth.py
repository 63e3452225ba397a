"""Customer-signed JWTs end to end: registration, every rule of spec 5.4 and every row of
the spec's JWT error table, through the real app, a real JWKS server on loopback and real
key pairs of all three algorithms."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from tests.api.helpers import assert_error
from tests.factories import make_org
from tests.jwks_server import JwksServer, running_jwks_server
from tests.jwt.kit import NOW, FrozenClock, Signer, make_signer

from parley.app import create_app
from parley.jwt import Algorithm

pytestmark = pytest.mark.anyio

AUD = "parley.test"
ALGS: list[Algorithm] = ["EdDSA", "ES256", "RS256"]


@dataclass
class Org:
    """An organization whose backend signs tokens for one issuer."""

    iss: str
    api: httpx.AsyncClient
    signer: Signer
    org_id: str

    def token(self, conversation_id: str = "c1", **claims: Any) -> str:
        base = {
            "iss": self.iss,
            "aud": AUD,
            "sub": "user-7",
            "conversation_id": conversation_id,
            "iat": NOW,
            "exp": NOW + 900,
            "jti": secrets.token_hex(8),
        }
        base.update(claims)
        return self.signer.sign(
            self.signer.header(), {k: v for k, v in base.items() if v is not None}
        )


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
        jwt_rate_burst=5,
        jwt_rate_per_minute=60,
    )
    application = create_app(settings, clock=clock)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def register_org(
    app: FastAPI, jwks: JwksServer | None, alg: Algorithm = "EdDSA", *, iss: str | None = None
) -> Org:
    created = await make_org(app.state.context)
    api = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url="http://testserver",
        headers={"Authorization": f"Bearer {created.api_key.secret}"},
    )
    signer = make_signer(alg, kid=f"{alg}-{secrets.token_hex(3)}")
    issuer = iss or f"https://{created.org.name}.example.com"
    if jwks is not None:
        jwks.publish(signer.jwk)
        body: dict[str, Any] = {"issuers": [issuer], "jwks_url": jwks.url}
    else:
        body = {"issuers": [issuer], "public_keys": [signer.jwk]}
    response = await api.put("/v1/auth/jwt", json=body)
    assert response.status_code == 200, response.text
    for conversation_id in ("c1", "c2"):
        agent = await api.post("/v1/agents", json={"name": f"a-{conversation_id}"})
        assert agent.status_code == 201
        made = await api.post(
            "/v1/conversations", json={"agent": f"a-{conversation_id}", "id": conversation_id}
        )
        assert made.status_code == 201, made.text
    return Org(iss=issuer, api=api, signer=signer, org_id=created.org.id)


@pytest.fixture
async def org(app: FastAPI, jwks: JwksServer) -> AsyncIterator[Org]:
    created = await register_org(app, jwks)
    yield created
    await created.api.aclose()


async def read(http: httpx.AsyncClient, token: str, conversation_id: str = "c1") -> httpx.Response:
    return await http.get(
        f"/v1/conversations/{conversation_id}", headers={"Authorization": f"Bearer {token}"}
    )


# --- registration -----------------------------------------------------------------------


async def test_put_jwt_config_with_jwks_url_shows_keys(org: Org, jwks: JwksServer) -> None:
    body = (await org.api.get("/v1/auth/jwt")).json()
    assert body["issuers"] == [org.iss]
    assert body["audience"] == AUD
    assert body["jwks_url"] == jwks.url
    assert body["public_keys"] == []
    assert body["keys"] == [{"kid": org.signer.kid, "kty": "OKP", "alg": "EdDSA", "source": "jwks"}]
    assert body["jwks_fetched_at"].endswith("Z")
    assert body["jwks_error"] is None


async def test_get_jwt_config_unconfigured_is_empty(app: FastAPI) -> None:
    created = await make_org(app.state.context)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
        response = await api.get(
            "/v1/auth/jwt", headers={"Authorization": f"Bearer {created.api_key.secret}"}
        )
    assert response.json()["issuers"] == []
    assert response.json()["audience"] == AUD


@pytest.mark.parametrize("alg", ALGS)
async def test_static_key_verifies_each_algorithm(
    app: FastAPI, http: httpx.AsyncClient, alg: Algorithm
) -> None:
    org = await register_org(app, None, alg)
    try:
        response = await read(http, org.token())
        assert response.status_code == 200, response.text
        assert response.json()["conversation"]["id"] == "c1"
        keys = (await org.api.get("/v1/auth/jwt")).json()["keys"]
        assert keys[0]["source"] == "static"
        assert keys[0]["alg"] == alg
    finally:
        await org.api.aclose()


async def test_static_pem_key_without_kid_gets_thumbprint(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    from cryptography.hazmat.primitives import serialization

    from parley.jwt import thumbprint

    signer = make_signer("ES256")
    pem = (
        signer.private_key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    created = await make_org(app.state.context)
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    response = await http.put(
        "/v1/auth/jwt", json={"issuers": ["pem-iss"], "public_keys": [pem]}, headers=headers
    )
    assert response.status_code == 200, response.text
    expected = thumbprint(signer.jwk)
    assert response.json()["keys"][0]["kid"] == expected


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"issuers": ["x"]}, 400, "validation_error"),
        ({"issuers": ["x"], "jwks_url": "https://a", "public_keys": [{}]}, 400, "validation_error"),
        ({"issuers": [], "public_keys": [{}]}, 400, "validation_error"),
        ({"issuers": ["x"] * 2, "jwks_url": "https://a"}, 400, "validation_error"),
        (
            {"issuers": [f"i{n}" for n in range(11)], "jwks_url": "https://a"},
            400,
            "validation_error",
        ),
        ({"issuers": ["x"], "public_keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, 400, "key_rejected"),
        ({"issuers": ["x"], "public_keys": ["not a pem"]}, 400, "key_rejected"),
        ({"issuers": ["x"], "jwks_url": "ftp://example.com/jwks"}, 400, "jwks_unreachable"),
        ({"issuers": ["x"], "jwks_url": "http://127.0.0.1:1/jwks.json"}, 400, "jwks_unreachable"),
        ({"issuers": ["x"], "public_keys": [{}], "extra": 1}, 400, "validation_error"),
    ],
    ids=[
        "no-key-source",
        "both-key-sources",
        "no-issuers",
        "repeated-issuer",
        "too-many-issuers",
        "symmetric-key",
        "bad-pem",
        "not-http",
        "unreachable",
        "unknown-field",
    ],
)
async def test_put_jwt_config_invalid_400(
    org: Org, body: dict[str, Any], status: int, code: str
) -> None:
    assert_error(await org.api.put("/v1/auth/jwt", json=body), status, code)
    assert (await org.api.get("/v1/auth/jwt")).json()["issuers"] == [org.iss]


async def test_put_jwt_config_whole_jwks_as_public_key_verifies(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    """The jwks.json of `parley keys generate` is a set: given whole, its keys register."""
    from parley.jwt import generate_key_pair

    pair = generate_key_pair("EdDSA")
    signer = make_signer("ES256", kid="second")
    created = await make_org(app.state.context)
    headers = {"Authorization": f"Bearer {created.api_key.secret}"}
    body = {"issuers": ["set-iss"], "public_keys": [pair.jwks, signer.jwk]}
    response = await http.put("/v1/auth/jwt", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert sorted(key["kid"] for key in response.json()["keys"]) == sorted([pair.kid, "second"])


async def test_put_jwt_config_object_without_kty_says_to_pass_the_set_or_its_keys(
    org: Org,
) -> None:
    body = {"issuers": ["x"], "public_keys": [{"kid": "k", "x": "abc"}]}
    response = await org.api.put("/v1/auth/jwt", json=body)
    assert_error(response, 400, "key_rejected")
    message = response.json()["param_errors"]["public_keys.0"]
    assert '"keys"' in message
    assert "the set itself" in message


async def test_put_jwt_config_jwks_with_bad_key_names_its_place(org: Org) -> None:
    body = {"issuers": ["x"], "public_keys": [{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}]}
    response = await org.api.put("/v1/auth/jwt", json=body)
    assert_error(response, 400, "key_rejected")
    assert "public_keys.0.keys.0" in response.json()["param_errors"]


async def test_put_jwt_config_empty_jwks_refused(org: Org) -> None:
    response = await org.api.put(
        "/v1/auth/jwt", json={"issuers": ["x"], "public_keys": [{"keys": []}]}
    )
    assert_error(response, 400, "key_rejected")


async def test_put_jwt_config_rsa_1024_refused(org: Org) -> None:
    from pathlib import Path

    pem = (Path(__file__).parent.parent / "fixtures" / "rsa1024_public.pem").read_text()
    response = await org.api.put("/v1/auth/jwt", json={"issuers": ["x"], "public_keys": [pem]})
    assert_error(response, 400, "key_rejected")


async def test_put_jwt_config_issuer_of_other_org_409(
    app: FastAPI, org: Org, jwks: JwksServer
) -> None:
    other = await register_org(app, None)
    try:
        response = await other.api.put(
            "/v1/auth/jwt", json={"issuers": [org.iss], "public_keys": [other.signer.jwk]}
        )
        assert_error(response, 409, "issuer_taken")
    finally:
        await other.api.aclose()


async def test_https_required_unless_operator_allows_refusals_name_switches(
    settings_factory: Any,
) -> None:
    app = create_app(settings_factory())
    async with app.router.lifespan_context(app):
        created = await make_org(app.state.context)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as api:
            headers = {"Authorization": f"Bearer {created.api_key.secret}"}
            plain = await api.put(
                "/v1/auth/jwt",
                json={"issuers": ["a"], "jwks_url": "http://127.0.0.1/j"},
                headers=headers,
            )
            private = await api.put(
                "/v1/auth/jwt",
                json={"issuers": ["a"], "jwks_url": "https://127.0.0.1/j"},
                headers=headers,
            )
    assert_error(plain, 400, "jwks_unreachable")
    assert_error(private, 400, "jwks_unreachable")
    assert "set PARLEY_JWKS_ALLOW_HTTP=true" in plain.json()["error"]["message"]
    assert "set PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS=true" in private.json()["error"]["message"]


# --- spec section 7: the JWT error table, exact status and message ----------------------


@pytest.mark.parametrize(
    ("forge", "status", "code", "message"),
    [
        ("foreign_key", 401, "invalid_signature", "invalid signature"),
        ("wrong_audience", 401, "invalid_audience", "invalid audience"),
        ("expired", 401, "token_expired", "token expired"),
        ("not_yet_valid", 401, "token_not_yet_valid", "token not yet valid"),
        ("other_conversation", 403, "conversation_id_mismatch", "conversation_id mismatch"),
        ("unregistered_issuer", 403, "issuer_not_registered", "issuer not registered"),
    ],
    ids=lambda value: value if isinstance(value, str) and " " not in value else None,
)
async def test_jwt_error_table_row(
    org: Org, http: httpx.AsyncClient, forge: str, status: int, code: str, message: str
) -> None:
    tokens = {
        "foreign_key": lambda: make_signer("EdDSA", kid=org.signer.kid).sign(
            org.signer.header(), {**_claims(org), "jti": "f1"}
        ),
        "wrong_audience": lambda: org.token(aud="someone-else.example"),
        "expired": lambda: org.token(iat=NOW - 1000, exp=NOW - 31),
        "not_yet_valid": lambda: org.token(nbf=NOW + 1),
        "other_conversation": lambda: org.token(conversation_id="c2"),
        "unregistered_issuer": lambda: org.token(iss="https://stranger.example"),
    }
    response = await read(http, tokens[forge]())
    body = assert_error(response, status, code)
    assert body["error"]["message"] == message
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"


def _claims(org: Org) -> dict[str, Any]:
    return {
        "iss": org.iss,
        "aud": AUD,
        "sub": "u",
        "conversation_id": "c1",
        "iat": NOW,
        "exp": NOW + 900,
    }


async def test_jti_replayed_409(org: Org, http: httpx.AsyncClient) -> None:
    token = org.token(jti="once")
    assert (await read(http, token)).status_code == 200
    body = assert_error(await read(http, token), 409, "jti_replayed")
    assert body["error"]["message"] == "jti replayed"


async def test_jti_replayed_under_concurrency_one_success(
    org: Org, http: httpx.AsyncClient
) -> None:
    token = org.token(jti="racy")
    responses = await asyncio.gather(*(read(http, token) for _ in range(5)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409, 409]


async def test_jti_forgotten_after_exp_plus_skew(
    org: Org, http: httpx.AsyncClient, clock: FrozenClock
) -> None:
    first = org.token(jti="later", exp=NOW + 60)
    assert (await read(http, first)).status_code == 200
    clock.advance(95)
    again = org.token(jti="later", iat=NOW + 95, exp=NOW + 95 + 60)
    assert (await read(http, again)).status_code == 200


# --- spec section 5.4: verification rules ------------------------------------------------


async def test_rule1_signature_must_verify_against_registered_key(
    org: Org, http: httpx.AsyncClient
) -> None:
    token = org.token()
    head, payload, signature = token.split(".")
    tampered = f"{head}.{payload}.{signature[:-4]}AAAA"
    assert_error(await read(http, tampered), 401, "invalid_signature")


async def test_rule2_issuer_must_be_registered(org: Org, http: httpx.AsyncClient) -> None:
    assert_error(await read(http, org.token(iss=org.iss + "/")), 403, "issuer_not_registered")


async def test_rule3_audience_must_match(org: Org, http: httpx.AsyncClient) -> None:
    assert (await read(http, org.token(aud=["x", AUD]))).status_code == 200
    assert_error(await read(http, org.token(aud=["x", "y"])), 401, "invalid_audience")


@pytest.mark.parametrize(("past_exp", "status"), [(29, 200), (30, 200), (31, 401)])
async def test_rule4_exp_skew_boundaries(
    org: Org, http: httpx.AsyncClient, clock: FrozenClock, past_exp: int, status: int
) -> None:
    token = org.token(iat=NOW - 300, exp=NOW - past_exp)
    response = await read(http, token)
    assert response.status_code == status, response.text


async def test_rule5_nbf_one_second_ahead_rejected(org: Org, http: httpx.AsyncClient) -> None:
    assert_error(await read(http, org.token(nbf=NOW + 1)), 401, "token_not_yet_valid")
    assert (await read(http, org.token(nbf=NOW))).status_code == 200


async def test_rule6_token_for_conversation_a_refused_on_b(
    org: Org, http: httpx.AsyncClient
) -> None:
    token = org.token(conversation_id="c1")
    assert_error(await read(http, token, "c2"), 403, "conversation_id_mismatch")


async def test_rule6_same_conversation_id_in_other_org_refused(
    app: FastAPI, org: Org, http: httpx.AsyncClient
) -> None:
    other = await register_org(app, None)
    try:
        response = await read(http, other.token(conversation_id="c1"))
        assert response.status_code == 200
        assert response.json()["conversation"]["agent"]["name"] == "a-c1"
        own = (await org.api.get("/v1/conversations/c1")).json()["conversation"]
        theirs = (await other.api.get("/v1/conversations/c1")).json()["conversation"]
        assert own["agent"] != theirs["agent"]
    finally:
        await other.api.aclose()


async def test_rule7_jti_used_twice_rejected(org: Org, http: httpx.AsyncClient) -> None:
    token = org.token(jti="twice")
    await read(http, token)
    assert_error(await read(http, token), 409, "jti_replayed")


async def test_token_lifetime_over_maximum_rejected(org: Org, http: httpx.AsyncClient) -> None:
    assert_error(await read(http, org.token(exp=NOW + 3601)), 401, "invalid_token")
    assert (await read(http, org.token(exp=NOW + 3600))).status_code == 200


async def test_require_jti_refuses_token_without_jti(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer
) -> None:
    assert (await read(http, org.token(jti=None))).status_code == 200
    await org.api.put(
        "/v1/auth/jwt", json={"issuers": [org.iss], "jwks_url": jwks.url, "require_jti": True}
    )
    assert_error(await read(http, org.token(jti=None)), 401, "invalid_token")


async def test_token_signed_by_other_orgs_key_invalid_signature(
    app: FastAPI, org: Org, http: httpx.AsyncClient
) -> None:
    other = await register_org(app, None)
    try:
        forged = other.signer.sign(other.signer.header(), {**_claims(org), "jti": "x1"})
        assert_error(await read(http, forged), 401, "invalid_signature")
    finally:
        await other.api.aclose()


@pytest.mark.parametrize(
    "token",
    ["a.b.c", "eyJ.eyJ.", "x" * 9000, "e30.e30.e30", "....", "eyJhbGciOiJub25lIn0.e30."],
    ids=["garbage-segments", "truncated", "oversized", "empty-json", "dots", "alg-none"],
)
async def test_malformed_token_401_never_500(http: httpx.AsyncClient, org: Org, token: str) -> None:
    response = await read(http, token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in {"invalid_token", "unauthorized"}


# --- scope --------------------------------------------------------------------------------


async def test_jwt_on_other_endpoints_insufficient_scope(org: Org, http: httpx.AsyncClient) -> None:
    headers = {"Authorization": f"Bearer {org.token()}"}
    for method, path in [
        ("GET", "/v1/agents"),
        ("POST", "/v1/agents/a-c1/disable"),
        ("GET", "/v1/auth/jwt"),
    ]:
        assert_error(await http.request(method, path, headers=headers), 403, "insufficient_scope")


async def test_jwt_on_api_key_only_route_leaves_jti_unused(
    org: Org, http: httpx.AsyncClient
) -> None:
    token = org.token(jti="not-spent-on-a-refusal")
    headers = {"Authorization": f"Bearer {token}"}
    for method, path in [("POST", "/v1/conversations"), ("GET", "/v1/conversations")]:
        assert_error(await http.request(method, path, headers=headers), 403, "insufficient_scope")
    assert (await read(http, token)).status_code == 200  # the jti was never recorded
    assert_error(await read(http, token), 409, "jti_replayed")


async def test_jwt_on_api_key_only_route_charges_no_rate_limit(
    org: Org, http: httpx.AsyncClient
) -> None:
    headers = {"Authorization": f"Bearer {org.token()}"}
    for _ in range(40):  # twice the burst
        response = await http.get("/v1/conversations", headers=headers)
        assert_error(response, 403, "insufficient_scope")
    assert (await read(http, org.token())).status_code == 200


@pytest.mark.parametrize(
    "token",
    [
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0",
        "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln.eHh4.eXl5",
        "not-a-jwt.at-all",
        "a.b.c.d",
    ],
    ids=["two-segments", "five-segments", "words", "four-segments"],
)
async def test_dotted_malformed_token_401_invalid_token(
    http: httpx.AsyncClient, org: Org, token: str
) -> None:
    assert_error(await read(http, token), 401, "invalid_token")
    assert_error(
        await http.get("/v1/agents", headers={"Authorization": f"Bearer {token}"}),
        401,
        "invalid_token",
    )


async def test_invalid_jwt_on_other_endpoint_still_401(org: Org, http: httpx.AsyncClient) -> None:
    response = await http.get(
        "/v1/agents", headers={"Authorization": f"Bearer {org.token(exp=NOW - 100, iat=NOW - 200)}"}
    )
    assert_error(response, 401, "token_expired")


async def test_unknown_conversation_with_matching_jwt_404_explains_websocket_creates_it(
    org: Org, http: httpx.AsyncClient
) -> None:
    token = org.token(conversation_id="nope")
    response = await read(http, token, "nope")
    assert_error(response, 404, "conversation_not_found")
    message = response.json()["error"]["message"]
    assert "created by the first WebSocket" in message
    assert "mint a new token" in message
    # The message is right: the read spent the jti, so the same token is now a replay.
    assert_error(await read(http, token, "nope"), 409, "jti_replayed")


async def test_unknown_conversation_with_api_key_404_plain_message(org: Org) -> None:
    response = await org.api.get("/v1/conversations/nope")
    assert_error(response, 404, "conversation_not_found")
    assert response.json()["error"]["message"] == "Conversation not found."


# --- rate limit ------------------------------------------------------------------------------


async def test_rate_limit_429_with_retry_after_keeps_jti(
    org: Org, http: httpx.AsyncClient, clock: FrozenClock
) -> None:
    for _ in range(5):
        assert (await read(http, org.token())).status_code == 200
    limited_token = org.token(jti="after-limit")
    limited = await read(http, limited_token)
    assert_error(limited, 429, "rate_limited")
    assert int(limited.headers["retry-after"]) >= 1
    clock.advance(2)
    assert (await read(http, limited_token)).status_code == 200


async def test_rate_limit_is_per_sub_and_conversation(org: Org, http: httpx.AsyncClient) -> None:
    for _ in range(5):
        await read(http, org.token(sub="busy"))
    assert_error(await read(http, org.token(sub="busy")), 429, "rate_limited")
    assert (await read(http, org.token(sub="calm"))).status_code == 200
    assert (await read(http, org.token(sub="busy", conversation_id="c2"), "c2")).status_code == 200


# --- key set cache: unknown kid, bursts, outage, rotation ------------------------------------


async def test_unknown_kid_fetches_once_then_401(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer
) -> None:
    before = jwks.fetches
    stranger = make_signer("EdDSA", kid="not-published")
    token = stranger.sign(stranger.header(), {**_claims(org), "jti": "k1"})
    assert_error(await read(http, token), 401, "invalid_signature")
    assert jwks.fetches == before + 1
    assert_error(await read(http, token.replace("k1", "k1")), 401, "invalid_signature")
    assert jwks.fetches == before + 1


async def test_burst_of_random_kids_fetches_at_most_once_per_30s(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer, clock: FrozenClock
) -> None:
    before = jwks.fetches

    async def attempt(n: int) -> int:
        signer = make_signer("EdDSA", kid=f"random-{n}")
        token = signer.sign(signer.header(), {**_claims(org), "jti": f"r{n}"})
        return (await read(http, token)).status_code

    statuses = await asyncio.gather(*(attempt(n) for n in range(100)))
    assert set(statuses) == {401}
    assert jwks.fetches - before <= 1
    clock.advance(10)
    await attempt(100)
    assert jwks.fetches - before <= 1
    clock.advance(25)
    await attempt(101)
    assert jwks.fetches - before <= 2


async def test_jwks_down_cached_keys_still_verify(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer, clock: FrozenClock
) -> None:
    jwks.down = True
    clock.advance(3600)
    response = await read(http, org.token(iat=NOW + 3600, exp=NOW + 3600 + 600))
    assert response.status_code == 200, response.text


async def test_jwks_down_and_stale_beyond_24h_503(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer, clock: FrozenClock
) -> None:
    jwks.down = True
    clock.advance(86_400 + 60)
    later = NOW + 86_400 + 60
    response = await read(http, org.token(iat=later, exp=later + 600))
    assert_error(response, 503, "jwks_unavailable")
    assert int(response.headers["retry-after"]) >= 1
    shown = (await org.api.get("/v1/auth/jwt")).json()
    assert shown["jwks_error"]


async def test_rotation_new_key_verifies_old_key_retired(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer
) -> None:
    new = make_signer("ES256", kid="rotated-2")
    jwks.publish(org.signer.jwk, new.jwk)
    new_token = new.sign(new.header(), {**_claims(org), "jti": "n1"})
    assert (await read(http, new_token)).status_code == 200
    assert (await read(http, org.token())).status_code == 200

    jwks.publish(new.jwk)
    refreshed = await org.api.post("/v1/auth/jwt/refresh")
    assert [k["kid"] for k in refreshed.json()["keys"]] == ["rotated-2"]

    assert_error(await read(http, org.token()), 401, "invalid_signature")
    assert (
        await read(http, new.sign(new.header(), {**_claims(org), "jti": "n2"}))
    ).status_code == 200


async def test_refresh_without_configuration_404(app: FastAPI, http: httpx.AsyncClient) -> None:
    created = await make_org(app.state.context)
    response = await http.post(
        "/v1/auth/jwt/refresh", headers={"Authorization": f"Bearer {created.api_key.secret}"}
    )
    assert_error(response, 404, "jwt_not_configured")


async def test_refresh_when_jwks_down_400(org: Org, jwks: JwksServer) -> None:
    jwks.down = True
    assert_error(await org.api.post("/v1/auth/jwt/refresh"), 400, "jwks_unreachable")


# --- one conversation ID rule (issue #9 finding 8) -------------------------------------------


@pytest.mark.parametrize(
    "conversation_id",
    ["c1\x00", "c" * 5000, "c" * 129, "c 1"],
    ids=["nul", "5000-chars", "129-chars", "space"],
)
async def test_jwt_conversation_id_breaking_rule_401_invalid_token(
    org: Org, http: httpx.AsyncClient, conversation_id: str
) -> None:
    assert_error(await read(http, org.token(conversation_id=conversation_id)), 401, "invalid_token")


# --- a refreshed JWKS without a usable key is a failed fetch (issue #9 finding 12) ------------

UNUSABLE_SETS = [
    pytest.param({"keys": []}, id="empty"),
    pytest.param({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}]}, id="only-symmetric"),
    pytest.param({"keys": [{"kty": "OKP", "crv": "X25519", "x": "AAAA"}]}, id="only-wrong-curve"),
]


async def assert_last_good_keys_kept(org: Org, http: httpx.AsyncClient) -> None:
    shown = (await org.api.get("/v1/auth/jwt")).json()
    assert [key["kid"] for key in shown["keys"]] == [org.signer.kid], shown
    assert shown["jwks_error"], shown
    assert (await read(http, org.token(iat=NOW, exp=NOW + 600))).status_code == 200


@pytest.mark.parametrize("document", UNUSABLE_SETS)
async def test_refresh_to_jwks_without_usable_key_400_keeps_last_good_keys(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer, document: dict[str, Any]
) -> None:
    jwks.document = document
    assert_error(await org.api.post("/v1/auth/jwt/refresh"), 400, "jwks_unreachable")
    await assert_last_good_keys_kept(org, http)


@pytest.mark.parametrize("document", UNUSABLE_SETS)
async def test_put_to_jwks_without_usable_key_400_jwks_unreachable_nothing_stored(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer, document: dict[str, Any]
) -> None:
    """API.md section 7: `PUT` fetches the JWKS once; 400 `jwks_unreachable` if that fails,
    and a set with no usable key is a failed fetch."""
    jwks.document = document
    again = {"issuers": [org.iss], "jwks_url": jwks.url, "audience": "other.example.com"}
    assert_error(await org.api.put("/v1/auth/jwt", json=again), 400, "jwks_unreachable")
    shown = (await org.api.get("/v1/auth/jwt")).json()
    assert shown["audience"] == AUD
    assert [key["kid"] for key in shown["keys"]] == [org.signer.kid], shown


@pytest.mark.parametrize("document", UNUSABLE_SETS)
async def test_scheduled_refresh_to_jwks_without_usable_key_keeps_last_good_keys(
    org: Org,
    http: httpx.AsyncClient,
    jwks: JwksServer,
    clock: FrozenClock,
    document: dict[str, Any],
) -> None:
    jwks.document = document
    clock.advance(3600)  # past max-age: the next token triggers a refresh
    later = NOW + 3600
    response = await read(http, org.token(iat=later, exp=later + 600))
    assert response.status_code == 200, response.text
    shown = (await org.api.get("/v1/auth/jwt")).json()
    assert [key["kid"] for key in shown["keys"]] == [org.signer.kid], shown
    assert shown["jwks_error"], shown


async def test_miss_refresh_to_empty_jwks_keeps_last_good_keys(
    org: Org, http: httpx.AsyncClient, jwks: JwksServer
) -> None:
    jwks.document = {"keys": []}
    stranger = make_signer("EdDSA", kid="unknown-kid")
    forged = stranger.sign(stranger.header(), {**_claims(org), "jti": "m1"})
    assert_error(await read(http, forged), 401, "invalid_signature")
    assert (await read(http, org.token())).status_code == 200
    shown = (await org.api.get("/v1/auth/jwt")).json()
    assert [key["kid"] for key in shown["keys"]] == [org.signer.kid], shown
    assert shown["jwks_error"], shown
