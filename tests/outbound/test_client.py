"""The one outbound client against a real HTTP server on 127.0.0.1: the address is checked
and pinned, redirects are returned unfollowed, and time and bytes are capped."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Sequence

import httpx
import pytest
from tests.webhook_receiver import Reply, WebhookReceiver, loopback_internet, running_receiver

from parley.outbound import (
    AddressPolicy,
    HostResolver,
    OutboundClient,
    OutboundFailed,
    OutboundRefused,
    OutboundResponse,
    OutboundTimeout,
    OutboundTooLarge,
)

pytestmark = pytest.mark.anyio

LOCAL = AddressPolicy(allow_http=True, allow_private_networks=True)
HTTP_ONLY = AddressPolicy(allow_http=True)
PUBLIC = "93.184.216.34"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


def answers(*rounds: Sequence[str]) -> HostResolver:
    """A resolver giving each round's addresses in turn (the last one repeats)."""
    queue = list(rounds)

    async def resolve(host: str, port: int) -> Sequence[str]:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return resolve


async def call(
    url: str,
    *,
    policy: AddressPolicy = LOCAL,
    resolve: HostResolver | None = None,
    timeout_s: float = 3.0,
    max_bytes: int = 64 * 1024,
) -> OutboundResponse:
    client = OutboundClient(resolve=resolve) if resolve else OutboundClient()
    try:
        return await client.request(
            "POST", url, policy=policy, timeout_s=timeout_s, max_bytes=max_bytes
        )
    finally:
        await client.aclose()


async def test_request_reaches_checked_address_with_host_name(receiver: WebhookReceiver) -> None:
    receiver.script(Reply.json({"ok": True}, status=201))
    client = OutboundClient(resolve=answers(["127.0.0.1"]))
    try:
        response = await client.request(
            "POST",
            f"http://hooks.example.com:{receiver.port}/hook?a=1",
            policy=LOCAL,
            headers={"X-Custom": "yes", "Host": "evil.example.com"},
            content=b'{"n": 1}',
            timeout_s=3,
            max_bytes=1024,
        )
    finally:
        await client.aclose()
    assert (response.status, response.body) == (201, b'{"ok": true}')
    assert response.url == f"http://hooks.example.com:{receiver.port}/hook?a=1"
    assert response.headers["content-type"] == "application/json"
    (request,) = receiver.requests
    assert (request.method, request.path, request.query) == ("POST", "/hook", {"a": ["1"]})
    assert request.headers["host"] == f"hooks.example.com:{receiver.port}"
    assert request.headers["x-custom"] == "yes"
    assert request.headers["accept-encoding"] == "identity"
    assert request.body == b'{"n": 1}'


async def test_request_loopback_refused_without_private_networks(
    receiver: WebhookReceiver,
) -> None:
    with pytest.raises(OutboundRefused) as caught:
        await call(receiver.url(), policy=HTTP_ONLY)
    assert "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS=true" in caught.value.message
    with pytest.raises(OutboundRefused):
        await call(f"http://localhost:{receiver.port}/", policy=HTTP_ONLY)
    assert receiver.requests == []


async def test_request_dns_rebinding_connects_to_checked_address(
    receiver: WebhookReceiver,
) -> None:
    """First answer public, second loopback: the first call goes to the address that was
    checked (never resolved twice), the second is refused before anything is sent."""
    http, connected = loopback_internet(PUBLIC)
    client = OutboundClient(http, resolve=answers([PUBLIC], ["127.0.0.1"]))
    url = f"http://rebind.example.com:{receiver.port}/hook"
    try:
        first = await client.request("GET", url, policy=HTTP_ONLY, timeout_s=3, max_bytes=1024)
        with pytest.raises(OutboundRefused):
            await client.request("GET", url, policy=HTTP_ONLY, timeout_s=3, max_bytes=1024)
    finally:
        await client.aclose()
    assert first.status == 200
    assert connected == [PUBLIC]
    (request,) = receiver.requests
    assert request.headers["host"] == f"rebind.example.com:{receiver.port}"


async def test_request_any_private_answer_refused(receiver: WebhookReceiver) -> None:
    http, connected = loopback_internet(PUBLIC)
    client = OutboundClient(http, resolve=answers([PUBLIC, "10.0.0.7"]))
    try:
        with pytest.raises(OutboundRefused, match="public addresses only"):
            await client.request(
                "GET", receiver.url(), policy=HTTP_ONLY, timeout_s=3, max_bytes=1024
            )
    finally:
        await client.aclose()
    assert connected == []


async def test_request_slow_answer_times_out(receiver: WebhookReceiver) -> None:
    receiver.script(Reply.json({}, delay_s=10))
    started = time.monotonic()
    with pytest.raises(OutboundTimeout, match="in time"):
        await call(receiver.url(), timeout_s=0.5)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("declare_length", [True, False], ids=["declared", "streamed"])
async def test_request_ten_megabytes_stops_at_cap(
    receiver: WebhookReceiver, declare_length: bool
) -> None:
    receiver.script(Reply.huge(declare_length=declare_length))
    with pytest.raises(OutboundTooLarge, match="more than 64 KiB"):
        await call(receiver.url())
    assert receiver.bytes_sent < 8 * 1024 * 1024


async def test_request_redirect_returned_not_followed(receiver: WebhookReceiver) -> None:
    receiver.script(Reply.redirect(receiver.url("/elsewhere")))
    response = await call(receiver.url("/hook"))
    assert response.status == 302
    assert response.is_redirect
    assert [request.path for request in receiver.requests] == ["/hook"]


async def test_request_compressed_answer_refused(receiver: WebhookReceiver) -> None:
    receiver.script(Reply(body=b"\x1f\x8b", headers={"Content-Encoding": "gzip"}))
    with pytest.raises(OutboundFailed, match="compressed"):
        await call(receiver.url())


async def test_request_unresolvable_host_fails_safely() -> None:
    async def failing(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror("Name or service not known")

    with pytest.raises(OutboundFailed, match="could not be resolved"):
        await call("https://nowhere.invalid/hook", resolve=failing)
    with pytest.raises(OutboundFailed, match="could not be resolved"):
        await call("https://nowhere.invalid/hook", resolve=answers([]))


async def test_request_closed_port_fails_without_naming_address() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OutboundFailed) as caught:
        await call(f"http://127.0.0.1:{port}/hook")
    assert caught.value.message == "The URL could not be reached."


async def test_request_refused_url_sends_nothing() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    client = OutboundClient(httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    try:
        with pytest.raises(OutboundRefused, match="PARLEY_OUTBOUND_ALLOW_HTTP"):
            await client.request(
                "GET", "http://hooks.example.com/", policy=AddressPolicy(), timeout_s=1,
                max_bytes=1,
            )  # fmt: skip
    finally:
        await client.aclose()
