"""Webhook URLs follow the rules of webhook tools (API.md sections 12 and 14): with the
operator's defaults, https on a public address only; a refusal is 400 naming `url`."""

from __future__ import annotations

import pytest
from tests.api.helpers import assert_error
from tests.types import Tenant

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/in",
        "https://127.0.0.1/in",
        "https://10.0.0.8/in",
        "https://[::1]/in",
        "https://169.254.169.254/latest",
        "https://user:pw@hooks.example.com/in",
        "ftp://hooks.example.com/in",
        "not a url",
        "https://localhost/hook",
        "https://hooks.localhost/hook",
    ],
    ids=[
        "http",
        "loopback",
        "private",
        "ipv6_loopback",
        "link_local",
        "userinfo",
        "ftp",
        "junk",
        "localhost",
        "under_localhost",
    ],
)
async def test_create_webhook_refused_url_400_naming_url(tenant: Tenant, url: str) -> None:
    response = await tenant.client.post("/v1/webhooks", json={"url": url})
    body = assert_error(response, 400, "validation_error")
    assert set(body["param_errors"]) == {"url"}


async def test_update_webhook_refused_url_400_naming_url(tenant: Tenant) -> None:
    created = await tenant.client.post("/v1/webhooks", json={"url": "https://hooks.example.com/in"})
    assert created.status_code == 201, created.text
    webhook_id = created.json()["webhook"]["id"]
    response = await tenant.client.patch(
        f"/v1/webhooks/{webhook_id}", json={"url": "http://hooks.example.com/in"}
    )
    body = assert_error(response, 400, "validation_error")
    assert set(body["param_errors"]) == {"url"}
