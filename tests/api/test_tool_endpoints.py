"""A webhook tool's endpoint URL at creation (API.md sections 11 and 12): https on a public
address unless the operator allows otherwise; a refusal is a 400 naming `endpoint_url`."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.config import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[False, True], ids=["default", "operator-allows"])
def settings(request: pytest.FixtureRequest, settings_factory: Any) -> Settings:
    allowed = bool(request.param)
    built: Settings = settings_factory(
        outbound_allow_http=allowed, outbound_allow_private_networks=allowed
    )
    return built


def tool(url: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Check the weather.",
        "type": "custom_webhook",
        "endpoint_url": url,
        "parameters": {"type": "object", "properties": {}},
    }


@pytest.mark.parametrize(
    ("url", "switch"),
    [
        ("http://tools.example.com/hook", "PARLEY_OUTBOUND_ALLOW_HTTP"),
        ("https://127.0.0.1/hook", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
        ("https://10.1.2.3:8443/hook", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
        ("https://[::1]/hook", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
        ("https://169.254.169.254/latest", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
        ("https://localhost/hook", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
        ("https://Tools.LOCALHOST./hook", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ],
    ids=[
        "http",
        "loopback",
        "private",
        "ipv6-loopback",
        "link-local-metadata",
        "localhost",
        "under-localhost",
    ],
)
async def test_tool_endpoint_url_not_https_or_private_refused_unless_operator_allows(
    tenant: Tenant, settings: Settings, url: str, switch: str
) -> None:
    response = await tenant.client.post("/v1/tools", json=tool(url, "hook"))

    if settings.outbound_allow_http:
        assert response.status_code == 201, response.text
        return
    body = assert_error(response, 400, "validation_error")
    assert switch in body["param_errors"]["endpoint_url"]
    listed = await tenant.client.get("/v1/tools")
    assert listed.json()["tools"] == []


async def test_tool_endpoint_url_https_public_host_accepted(tenant: Tenant) -> None:
    response = await tenant.client.post(
        "/v1/tools", json=tool("https://tools.example.com/hook", "hook")
    )

    assert response.status_code == 201, response.text


async def test_tool_endpoint_url_patched_to_private_refused_unless_operator_allows(
    tenant: Tenant, settings: Settings
) -> None:
    created = await tenant.client.post(
        "/v1/tools", json=tool("https://tools.example.com/hook", "hook")
    )
    assert created.status_code == 201, created.text

    response = await tenant.client.patch(
        "/v1/tools/hook", json={"endpoint_url": "https://192.168.1.10/hook"}
    )

    if settings.outbound_allow_private_networks:
        assert response.status_code == 200, response.text
        return
    assert_error(response, 400, "validation_error")
    kept = (await tenant.client.get("/v1/tools/hook")).json()["tool"]
    assert kept["endpoint_url"] == "https://tools.example.com/hook"
