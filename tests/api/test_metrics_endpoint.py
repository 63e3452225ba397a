"""GET /metrics: off by default, the series an operator needs, and no credential in a label."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from tests.factories import make_org

from parley.app import create_app
from parley.jwt import generate_key_pair, mint_token

pytestmark = pytest.mark.anyio
METRICS_TOKEN = "scrape-token-0123456789"


async def started(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://parley.test") as client:
            yield client


@pytest.fixture
async def app(settings_factory: Any) -> FastAPI:
    return create_app(settings_factory(metrics=True, public_url="https://parley.test"))


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async for client in started(app):
        yield client


async def test_metrics_off_by_default_404(settings_factory: Any) -> None:
    async for client in started(create_app(settings_factory())):
        response = await client.get("/metrics")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


async def test_metrics_scrape_finds_every_series(app: FastAPI, http: httpx.AsyncClient) -> None:
    created = await make_org(app.state.context)
    key = {"Authorization": f"Bearer {created.api_key.secret}"}
    assert (await http.get("/health")).status_code == 200
    assert (await http.get("/v1/agents/main-agent", headers=key)).status_code == 404
    assert (await http.get("/v1/agents")).status_code == 401
    assert (await http.get("/nowhere/at/all")).status_code == 404
    assert (await http.get("/examples/browser/")).status_code == 200

    scrape = await http.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain")
    text = scrape.text
    for line in [
        'parley_http_requests_total{method="GET",route="/health",status="200"} 1.0',
        'parley_http_requests_total{method="GET",route="/v1/agents/{nameOrId}",status="404"} 1.0',
        'parley_http_requests_total{method="GET",route="/v1/agents",status="401"} 1.0',
        'parley_http_requests_total{method="GET",route="unmatched",status="404"} 1.0',
        # a mount's files by its prefix, never by the file's path
        'parley_http_requests_total{method="GET",route="/examples/{path}",status="200"} 1.0',
        'parley_auth_refusals_total{code="unauthorized"} 1.0',
        "parley_live_conversations 0.0",
        'parley_store_errors_total{store="database"} 0.0',
        'parley_jwks_fetches_total{outcome="failed"} 0.0',
    ]:
        assert line in text, line
    for series in [
        "parley_http_request_duration_seconds_bucket",
        "parley_turn_latency_seconds_bucket",
        'parley_queue_time_seconds_bucket{le="0.1",stage="stt"}',
        'parley_queue_time_seconds_bucket{le="0.1",stage="tts"}',
    ]:
        assert series in text, series


async def test_metrics_token_required_when_configured(settings_factory: Any) -> None:
    app = create_app(settings_factory(metrics=True, metrics_token=METRICS_TOKEN))
    async for client in started(app):
        assert (await client.get("/metrics")).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token-at-all"}
        assert (await client.get("/metrics", headers=wrong)).status_code == 401
        right = {"Authorization": f"Bearer {METRICS_TOKEN}"}
        response = await client.get("/metrics", headers=right)
        assert response.status_code == 200
        assert "parley_http_requests_total" in response.text
        assert METRICS_TOKEN not in response.text


async def test_metrics_labels_hold_no_credential_or_chosen_id(
    app: FastAPI, http: httpx.AsyncClient
) -> None:
    created = await make_org(app.state.context)
    api_key = created.api_key.secret
    keys = generate_key_pair("EdDSA")
    issuer = "https://tenant-issuer.example.com"
    put = await http.put(
        "/v1/auth/jwt",
        json={"issuers": [issuer], "public_keys": keys.jwks["keys"]},
        headers={"Authorization": f"Bearer {api_key}"},
    )
    assert put.status_code == 200, put.text
    conversation_id = "customer-chosen-id-5c1d"
    jwt = mint_token(
        keys.private_key_pem, kid=keys.kid, iss=issuer, aud="parley.test", sub="end-user-42",
        conversation_id=conversation_id,
    )  # fmt: skip
    token = (
        await http.post("/v1/auth/session_token", headers={"Authorization": f"Bearer {api_key}"})
    ).json()["session_token"]
    forged = "parley_sk_" + "A" * 43
    for path, headers in [
        (f"/v1/conversations/{conversation_id}", {"Authorization": f"Bearer {jwt}"}),
        (f"/v1/conversations/{conversation_id}?jwt={jwt}", {}),
        (f"/v1/conversations?session_token={token}", {"Authorization": f"Bearer {token}"}),
        (f"/v1/agents?api_key={api_key}", {"Authorization": f"Bearer {forged}"}),
        (f"/v1/agents/{api_key}", {"Authorization": f"Bearer {api_key}"}),
        (f"/{api_key}/{jwt}", {}),
        ("/v1/sts/ws", {"Authorization": f"Bearer {jwt}"}),
    ]:
        await http.get(path, headers=headers)

    text = (await http.get("/metrics")).text
    for secret in [api_key, jwt, token, forged, conversation_id, issuer, "end-user-42",
                   created.org.id, keys.kid]:  # fmt: skip
        assert secret not in text, secret
    templates = set(app.openapi()["paths"]) | {"/v1/sts/ws", "/metrics", "unmatched"}
    templates |= {"/examples/{path}", "/docs/assets/{path}", "/dashboard/static/{path}"}
    routes = set(re.findall(r'route="([^"]*)"', text))
    assert routes
    assert routes <= templates, routes - templates
    codes = set(re.findall(r'code="([^"]*)"', text))
    assert codes
    assert all(re.fullmatch(r"[a-z_]+", code) for code in codes), codes
