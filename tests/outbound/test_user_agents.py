"""Every call leaving the service names Parley as its User-Agent (issue #38, item 9), never
the HTTP library's: JWKS fetches `Parley-JWKS`, webhook tool calls `Parley-Tools`
(tests/services/test_webhook_tools.py), webhooks `Parley-Webhooks`, any other `Parley`; and
sends no framing header of its caller's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.webhook_receiver import Reply, WebhookReceiver, running_receiver

from parley.jwt.jwks import JwksFetcher
from parley.outbound import AddressPolicy, OutboundClient

pytestmark = pytest.mark.anyio

LOCAL = AddressPolicy(allow_http=True, allow_private_networks=True)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


async def test_jwks_fetch_user_agent_is_parley_jwks(receiver: WebhookReceiver) -> None:
    receiver.script(Reply.json({"keys": []}))
    client = OutboundClient()
    try:
        fetcher = JwksFetcher(client, allow_http=True, allow_private_networks=True)
        await fetcher.fetch(receiver.url("/jwks"))
    finally:
        await client.aclose()
    (request,) = receiver.requests
    assert request.headers["user-agent"] == "Parley-JWKS"


async def test_outbound_call_without_user_agent_sends_parley(receiver: WebhookReceiver) -> None:
    client = OutboundClient()
    try:
        await client.request("GET", receiver.url(), policy=LOCAL, timeout_s=3, max_bytes=1024)
        await client.request(
            "GET",
            receiver.url(),
            policy=LOCAL,
            headers={"user-agent": "Caller/1"},
            timeout_s=3,
            max_bytes=1024,
        )
    finally:
        await client.aclose()
    first, second = receiver.requests
    assert first.headers["user-agent"] == "Parley"
    assert second.headers["user-agent"] == "Caller/1"


async def test_outbound_call_callers_framing_headers_never_sent(receiver: WebhookReceiver) -> None:
    client = OutboundClient()
    framing = {"Transfer-Encoding": "chunked", "TE": "trailers", "Upgrade": "h2c",
               "Keep-Alive": "timeout=1", "Proxy-Connection": "close", "Trailer": "X-After",
               "Content-Length": "1", "Host": "evil.example", "X-Kept": "yes"}  # fmt: skip
    try:
        await client.request(
            "POST",
            receiver.url(),
            policy=LOCAL,
            headers=framing,
            content=b"{}",
            timeout_s=3,
            max_bytes=1024,
        )
    finally:
        await client.aclose()
    (request,) = receiver.requests
    assert request.body == b"{}"
    assert request.headers["x-kept"] == "yes"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    for name in ("transfer-encoding", "te", "upgrade", "keep-alive", "proxy-connection", "trailer"):
        assert name not in request.headers
