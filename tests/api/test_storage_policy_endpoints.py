"""An external storage policy's `endpoint_url` (API.md sections 11 and 16) follows the
outbound address rules of webhooks and webhook tools: https on a public address unless the
operator allows otherwise, no credentials in it; a refusal is a 400 naming `endpoint_url`."""

from __future__ import annotations

from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

from parley.config import Settings

pytestmark = pytest.mark.anyio

PATH = "/v1/external_storage_policies"
REFUSED_BY_DEFAULT = [
    ("http://s3.example.com", "PARLEY_OUTBOUND_ALLOW_HTTP"),
    ("https://127.0.0.1:9000", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ("https://10.1.2.3", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ("https://[::1]", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ("https://169.254.169.254", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ("https://localhost:9000", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
    ("https://minio.localhost", "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS"),
]


@pytest.fixture(params=[False, True], ids=["default", "operator-allows"])
def settings(request: pytest.FixtureRequest, settings_factory: Any) -> Settings:
    allowed = bool(request.param)
    built: Settings = settings_factory(
        outbound_allow_http=allowed, outbound_allow_private_networks=allowed
    )
    return built


def policy(url: str, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "endpoint_url": url,
        "bucket": "parley-recordings",
        "access_key_id": "AKIAPARLEYTEST",
        "secret_access_key": "secret",
    }


async def test_storage_policy_endpoint_url_not_https_or_private_refused_unless_operator_allows(
    tenant: Tenant, settings: Settings
) -> None:
    for number, (url, switch) in enumerate(REFUSED_BY_DEFAULT):
        response = await tenant.client.post(PATH, json=policy(url, f"store_{number}"))
        if settings.outbound_allow_http:
            assert response.status_code == 200, (url, response.text)
            continue
        body = assert_error(response, 400, "validation_error")
        assert switch in body["param_errors"]["endpoint_url"], (url, body)
    listed = (await tenant.client.get(PATH)).json()["external_storage_policies"]
    assert len(listed) == (len(REFUSED_BY_DEFAULT) if settings.outbound_allow_http else 0)


async def test_storage_policy_endpoint_url_patched_to_private_refused_unless_operator_allows(
    tenant: Tenant, settings: Settings
) -> None:
    created = await tenant.client.post(PATH, json=policy("https://s3.example.com", "archive"))
    assert created.status_code == 200, created.text
    assert_error(
        await tenant.client.patch(
            f"{PATH}/archive", json={"endpoint_url": "https://key:secret@s3.example.com"}
        ),
        400,
        "validation_error",
    )

    response = await tenant.client.patch(
        f"{PATH}/archive", json={"endpoint_url": "http://192.168.1.10:9000"}
    )

    kept = (await tenant.client.get(f"{PATH}/archive")).json()["external_storage_policy"]
    if settings.outbound_allow_private_networks:
        assert response.status_code == 200, response.text
        assert kept["endpoint_url"] == "http://192.168.1.10:9000"
        return
    assert_error(response, 400, "validation_error")
    assert kept["endpoint_url"] == "https://s3.example.com"
