"""The SDK's four SIP calls answer 501 `not_supported` with a reason, never a 404, and only
to an API key (API.md section 17), through the official SDK and raw HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from phonic import AsyncPhonic
from phonic.core.api_error import ApiError
from phonic.core.request_options import RequestOptions
from tests.api.helpers import assert_error
from tests.types import Tenant

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:websockets.exceptions.InvalidStatusCode:DeprecationWarning"),
]

SIP_ROUTES = [
    ("POST", "/v1/agents/support/custom-phone-numbers"),
    ("DELETE", "/v1/agents/support/custom-phone-numbers"),
    ("PATCH", "/v1/agents/support/phone-numbers"),
    ("POST", "/v1/conversations/sip/outbound_call"),
]

ONCE: RequestOptions = {"max_retries": 0}
"""The SDK retries a 5xx twice by default, seconds apart; the answer would be the same."""


def sip_calls(sdk: AsyncPhonic) -> list[Callable[[], Awaitable[object]]]:
    return [
        lambda: sdk.agents.add_custom_phone_number(
            "support",
            phone_number="+14155550100",
            sip_address="sip:pbx.example.com",
            sip_auth_username="u",
            sip_auth_password="p",
            request_options=ONCE,
        ),
        lambda: sdk.agents.delete_custom_phone_number(
            "support", phone_number="+14155550100", request_options=ONCE
        ),
        lambda: sdk.agents.update_phone_number(
            "support", phone_number="+14155550100", request_options=ONCE
        ),
        lambda: sdk.conversations.sip_outbound_call(
            sip_address="sip:pbx.example.com",
            from_phone_number="+14155550100",
            to_phone_number="+14155550111",
            request_options=ONCE,
        ),
    ]


async def test_sip_calls_through_the_sdk_answer_501_not_supported(sdk: AsyncPhonic) -> None:
    for call in sip_calls(sdk):
        with pytest.raises(ApiError) as refused:
            await call()
        assert refused.value.status_code == 501
        body = refused.value.body
        assert isinstance(body, dict)
        assert body["error"]["code"] == "not_supported"
        assert "SIP trunk" in body["error"]["message"]


@pytest.mark.parametrize(("method", "path"), SIP_ROUTES, ids=[f"{m} {p}" for m, p in SIP_ROUTES])
async def test_sip_route_needs_an_api_key(
    client: httpx.AsyncClient, method: str, path: str
) -> None:
    assert_error(await client.request(method, path, json={}), 401, "unauthorized")


@pytest.mark.parametrize(("method", "path"), SIP_ROUTES, ids=[f"{m} {p}" for m, p in SIP_ROUTES])
async def test_sip_route_with_an_api_key_501(tenant: Tenant, method: str, path: str) -> None:
    assert_error(await tenant.client.request(method, path, json={}), 501, "not_supported")
