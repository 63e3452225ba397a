"""Every non-2xx answer is the API.md envelope; never a framework default, never a 422."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.api.bare_routes import BareRoute, BareWebSocketRoute
from parley.api.openapi import PUBLIC_PATHS

pytestmark = pytest.mark.anyio


async def test_unknown_route_404_envelope(tenant: Tenant) -> None:
    assert_error(await tenant.client.get("/v1/nothing-here"), 404, "not_found")


async def test_unknown_route_without_credential_404_envelope(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/nope"), 404, "not_found")


async def test_wrong_method_405_envelope(tenant: Tenant) -> None:
    response = await tenant.client.put("/v1/agents")
    assert_error(response, 405, "method_not_allowed")
    assert "GET" in response.headers["allow"]


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/v1/agents", "GET, POST"),
        ("PUT", "/v1/agents/alpha", "DELETE, GET, PATCH"),
        ("PUT", "/v1/projects/main", "DELETE, GET, PATCH"),
        ("DELETE", "/v1/auth/jwt", "GET, PUT"),
        ("PUT", "/v1/conversations", "GET, POST"),
        ("GET", "/v1/agents/alpha/disable", "POST"),
    ],
)
async def test_405_allow_names_every_method_of_the_path(
    tenant: Tenant, method: str, path: str, allow: str
) -> None:
    """RFC 9110 section 15.5.6: `Allow` lists what the resource serves, not one route's."""
    response = await tenant.client.request(method, path)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allow


@pytest.mark.parametrize("path", ["/v1/agents/", "/v1/agents/alpha/", "/health/"])
async def test_trailing_slash_is_404_never_a_redirect(tenant: Tenant, path: str) -> None:
    """No 307 with an empty body, and no Location built from the client's Host header."""
    response = await tenant.client.get(path, headers={"host": "evil.example"})
    assert_error(response, 404, "not_found")
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("content", "path"),
    [(b"{bad", "/v1/agents"), (b'{"name": "\xff"}', "/v1/api_keys"), (b"{", "/v1/projects")],
    ids=["bad-json", "not-utf8", "truncated"],
)
@pytest.mark.parametrize("credential", [None, "parley_sk_" + "A" * 43], ids=["none", "unknown"])
async def test_unreadable_body_without_valid_key_is_401_first(
    client: httpx.AsyncClient, content: bytes, path: str, credential: str | None
) -> None:
    """API.md section 1: a missing or unknown key is 401, whatever the body (FastAPI reads
    the body before the route's dependencies)."""
    headers = {"content-type": "application/json"}
    if credential is not None:
        headers["authorization"] = f"Bearer {credential}"
    response = await client.post(path, content=content, headers=headers)
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


async def test_unreadable_body_with_a_session_token_is_403_insufficient_scope(
    tenant: Tenant, client: httpx.AsyncClient
) -> None:
    minted = await tenant.client.post("/v1/auth/session_token")
    token = minted.json()["session_token"]
    response = await client.post(
        "/v1/agents",
        content=b"{bad",
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    assert_error(response, 403, "insufficient_scope")


async def test_body_not_utf8_with_a_valid_key_400_invalid_request(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents", content=b'{"name": "\xff"}', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_request", "invalid_json"}


async def test_malformed_json_400_invalid_json(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents", content=b'{"name": ', headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "invalid_json")


@pytest.mark.parametrize(
    "content",
    [b"[]", b'"text"', b"42", b"null"],
    ids=["array", "string", "number", "null"],
)
async def test_body_not_an_object_400(tenant: Tenant, content: bytes) -> None:
    response = await tenant.client.post(
        "/v1/agents", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"validation_error", "invalid_json"}


async def test_body_not_json_content_type_400(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/agents", content=b"name=x", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 400
    assert "detail" not in response.json()


async def test_validation_error_has_param_errors_never_422(tenant: Tenant) -> None:
    response = await tenant.client.post("/v1/agents", json={"name": 1, "extra": True})
    body = assert_error(response, 400, "validation_error")
    assert set(body["param_errors"]) == {"name", "extra"}


async def test_oversized_body_413_by_content_length(tenant: Tenant) -> None:
    big = b'{"name": "' + b"a" * (1024 * 1024) + b'"}'
    response = await tenant.client.post(
        "/v1/agents", content=big, headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")


async def test_oversized_body_413_when_streamed(tenant: Tenant) -> None:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(20):
            yield b"a" * 65536

    response = await tenant.client.post(
        "/v1/agents", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")


async def test_unexpected_exception_500_generic_message(
    app: FastAPI, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    async def explode() -> None:
        raise RuntimeError("secret internals: parley_sk_leak")

    app.add_api_route("/v1/test-explode", explode)

    response = await client.get("/v1/test-explode")

    body = assert_error(response, 500, "internal_error")
    assert "secret" not in response.text
    assert body["error"]["message"] == "Internal server error."
    assert any("RuntimeError" in (r.exc_text or "") for r in caplog.records)


async def test_database_down_503_service_unavailable(
    settings_factory,
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    from parley.app import create_app

    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    app = create_app(settings_factory(database_url=f"sqlite:///{broken}"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            response = await http.get(
                "/v1/agents", headers={"Authorization": "Bearer parley_sk_" + "A" * 43}
            )
            health = await http.get("/health")
    assert_error(response, 503, "service_unavailable")
    assert_error(health, 503, "service_unavailable")


async def test_postgres_down_503_service_unavailable(settings_factory) -> None:  # type: ignore[no-untyped-def]
    from parley.app import create_app

    url = "postgresql://postgres@127.0.0.1:1/parley"
    app = create_app(settings_factory(database_url=url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            response = await http.get(
                "/v1/agents", headers={"Authorization": "Bearer parley_sk_" + "A" * 43}
            )
    assert_error(response, 503, "service_unavailable")


async def test_oversized_credential_401_invalid_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/agents", headers={"Authorization": "Bearer " + "a" * 9000})
    assert_error(response, 401, "invalid_token")


async def test_query_string_credential_ignored_on_rest(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.get("/v1/agents", params={"api_key": tenant.api_key})
    assert_error(response, 401, "unauthorized")


async def test_health_needs_no_credential(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


async def test_health_served_bare_still_documented_and_enveloped(
    client: httpx.AsyncClient,
) -> None:
    """`GET /health` is a plain Starlette route: the OpenAPI document still describes it
    (its model, its 503), and a wrong method still gets the error envelope."""
    response = await client.get("/health")
    assert response.headers["content-type"] == "application/json"
    assert set(response.json()) == {"status", "database"}
    operation = (await client.get("/openapi.json")).json()["paths"]["/health"]["get"]
    assert operation["operationId"] == "get_health_health_get"
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/HealthOut")
    assert "503" in operation["responses"]
    assert_error(await client.post("/health"), 405, "method_not_allowed")


async def test_openapi_describes_every_endpoint_with_error_bodies(
    client: httpx.AsyncClient,
) -> None:
    schema = (await client.get("/openapi.json")).json()
    paths = schema["paths"]
    expected = {
        ("get", "/v1/agents"),
        ("post", "/v1/agents"),
        ("get", "/v1/agents/{nameOrId}"),
        ("patch", "/v1/agents/{nameOrId}"),
        ("delete", "/v1/agents/{nameOrId}"),
        ("post", "/v1/agents/{nameOrId}/disable"),
        ("post", "/v1/agents/{nameOrId}/enable"),
        ("post", "/v1/agents/{nameOrId}/phone_numbers/release"),
        ("get", "/v1/projects"),
        ("post", "/v1/projects"),
        ("get", "/v1/projects/{nameOrId}"),
        ("delete", "/v1/projects/{nameOrId}"),
        ("get", "/v1/api_keys"),
        ("post", "/v1/api_keys"),
        ("delete", "/v1/api_keys/{id}"),
    }
    present = {(method, path) for path, ops in paths.items() for method in ops}
    assert expected <= present
    for path, ops in paths.items():
        for method, operation in ops.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            errors = [code for code in responses if code[0] in "45"]
            assert {"400", "503"} <= set(errors), (method, path)
            if path not in PUBLIC_PATHS:  # /health, and the carrier's signed voice webhook
                assert "401" in errors, (method, path)
            for code in errors:
                ref = responses[code]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorOut"), (method, path, code)
    disable = paths["/v1/agents/{nameOrId}/disable"]["post"]["responses"]
    assert {"200", "401", "403", "404"} <= set(disable)
    assert "HTTPValidationError" not in schema["components"]["schemas"]


async def test_docs_page_served(client: httpx.AsyncClient) -> None:
    response = await client.get("/docs")
    assert response.status_code == 200


async def test_hot_entry_points_served_bare_and_first(app: FastAPI) -> None:
    """`GET /health` and the conversation WebSocket are the app's first routes, Starlette's
    own (no FastAPI machinery), and the only routes of their paths."""
    first = app.router.routes[:2]
    assert [type(route) for route in first] == [BareRoute, BareWebSocketRoute]
    assert [getattr(route, "path", None) for route in first] == ["/health", "/v1/sts/ws"]
    later = [getattr(route, "path", None) for route in app.router.routes[2:]]
    assert "/health" not in later
    assert "/v1/sts/ws" not in later
