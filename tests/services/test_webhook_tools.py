"""Webhook tool calls (API.md section 12) against a real receiving server on 127.0.0.1,
whose requests are verified with the real `standardwebhooks` and `svix` libraries."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks

from parley.clock import SystemClock
from parley.composition.context import open_context
from parley.composition.options import RuntimeOptions
from parley.outbound import AddressPolicy, HostResolver, OutboundClient, new_signing_secret
from parley.records import ProjectRef, Tool
from parley.services import Context
from parley.services.webhook_tools import WebhookToolOutcome, call_webhook_tool
from tests import databases
from tests.webhook_receiver import Reply, WebhookReceiver, loopback_internet, running_receiver

pytestmark = pytest.mark.anyio

LOCAL = AddressPolicy(allow_http=True, allow_private_networks=True)
PUBLIC = "93.184.216.34"
SECRET = new_signing_secret()
CALL_ID = "tcall_0123456789abcdef"
CONVERSATION_ID = "conv_0123456789abcdef"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture
async def base_ctx(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Context]:
    """A services context (no call here touches its database)."""
    options = RuntimeOptions(
        database_url=databases.sqlite_copy(sqlite_template, tmp_path),
        redis_url=None,
        default_audience="127.0.0.1",
        secret_key="Xk7-WCe3E0wC2C8NCjIqePJ-aopCsseSNxN4fm6vUl0=",
    )
    async with open_context(options, clock=SystemClock()) as ctx:
        yield ctx


def with_outbound(
    ctx: Context, *, policy: AddressPolicy = LOCAL, client: OutboundClient | None = None
) -> Context:
    return replace(ctx, outbound=client or ctx.outbound, outbound_policy=policy)


def make_tool(url: str, **fields: Any) -> Tool:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    values: dict[str, Any] = {
        "id": "tool_0123456789abcdef",
        "org_id": "org_0123456789abcdef",
        "project": ProjectRef(id="proj_0123456789abcdef", name="main"),
        "name": "get_weather",
        "description": "The weather of a city.",
        "type": "custom_webhook",
        "execution_mode": "sync",
        "parameters": {"type": "object", "properties": {}},
        "parameter_locations": None,
        "endpoint_method": "POST",
        "endpoint_url": url,
        "endpoint_headers": None,
        "endpoint_timeout_ms": None,
        "tool_call_output_timeout_ms": None,
        "require_speech_before_tool_call": False,
        "signing_secret": SECRET,
        "created_at": now,
        "updated_at": now,
    }
    values.update(fields)
    return Tool(**values)


async def call(ctx: Context, tool: Tool, **arguments: Any) -> WebhookToolOutcome:
    return await call_webhook_tool(
        ctx, tool, call_id=CALL_ID, conversation_id=CONVERSATION_ID, arguments=arguments
    )


def answers(*rounds: Sequence[str]) -> HostResolver:
    queue = list(rounds)

    async def resolve(host: str, port: int) -> Sequence[str]:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return resolve


def assert_signed(body: bytes, headers: dict[str, str]) -> None:
    """Both receiver libraries accept the request (they raise otherwise)."""
    standardwebhooks.Webhook(SECRET).verify(body, headers, json_parse=False)
    svix.webhooks.Webhook(SECRET).verify(body, headers)


async def test_call_webhook_tool_post_signed_json_body_is_output(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({"temperature": 21}))
    tool = make_tool(
        receiver.url("/weather"),
        endpoint_headers={"X-Api-Key": "k1", "Idempotency-Key": "x", "webhook-id": "x",
                          "Content-Type": "text/plain", "Host": "evil.example"},
    )  # fmt: skip
    outcome = await call(with_outbound(base_ctx), tool, city="Paris", days=2)
    assert outcome.output == {"temperature": 21}
    assert (outcome.response_status_code, outcome.error_message) == (200, None)
    assert outcome.response_body == {"temperature": 21}
    assert outcome.request_body == {"city": "Paris", "days": 2, "conversation_id": CONVERSATION_ID}
    assert (outcome.endpoint_method, outcome.endpoint_url) == ("POST", receiver.url("/weather"))
    assert outcome.timed_out is False
    assert outcome.endpoint_called_at.tzinfo is not None
    (request,) = receiver.requests
    assert request.json() == outcome.request_body
    assert request.headers["idempotency-key"] == CALL_ID
    assert request.headers["webhook-id"] == CALL_ID
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-api-key"] == "k1"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    assert_signed(request.body, request.headers)


async def test_call_webhook_tool_get_query_path_and_empty_body_signed(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json([1, 2]))
    tool = make_tool(
        receiver.url("/items/{item_id}/stock?fixed=1"),
        endpoint_method="GET",
        parameters=[
            {"type": "string", "name": "item_id", "description": "", "is_required": True,
             "location": "url_path"},
            {"type": "string", "name": "city", "description": "", "is_required": True},
        ],
    )  # fmt: skip
    outcome = await call(with_outbound(base_ctx), tool, item_id="a/b c?x#y", city="São Paulo", n=3)
    assert outcome.output == [1, 2]
    assert outcome.request_body is None
    (request,) = receiver.requests
    assert (request.method, request.body) == ("GET", b"")
    assert request.path == "/items/a%2Fb%20c%3Fx%23y/stock"
    assert request.query == {
        "fixed": ["1"],
        "city": ["São Paulo"],
        "n": ["3"],
        "conversation_id": [CONVERSATION_ID],
    }
    assert outcome.endpoint_url.startswith(receiver.url("/items/a%2Fb%20c%3Fx%23y/stock?fixed=1&"))
    assert "content-type" not in request.headers
    assert_signed(b"", request.headers)


async def test_call_webhook_tool_parameter_locations_place_each_argument(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    tool = make_tool(
        receiver.url("/orders/{order}"),
        parameter_locations={"order": "url_path", "verbose": "query_string"},
    )
    outcome = await call(with_outbound(base_ctx), tool, order="42", verbose=True, note="hi")
    (request,) = receiver.requests
    assert (request.path, request.query) == ("/orders/42", {"verbose": ["true"]})
    assert request.json() == {"note": "hi", "conversation_id": CONVERSATION_ID}
    assert outcome.output == {}


@pytest.mark.parametrize(
    ("reply", "why", "response_body"),
    [
        (Reply.json({"detail": "boom"}, status=500), "HTTP 500", {"detail": "boom"}),
        (Reply.text("plain words"), "did not answer with JSON", "plain words"),
        (Reply.garbage(), "did not answer with JSON", "\ufffd\ufffd<not json>"),
        (Reply(body=b""), "did not answer with JSON", None),
    ],
    ids=["status-500", "text", "garbage", "empty"],
)
async def test_call_webhook_tool_bad_answer_is_error_output(
    base_ctx: Context, receiver: WebhookReceiver, reply: Reply, why: str, response_body: Any
) -> None:
    receiver.script(reply)
    outcome = await call(with_outbound(base_ctx), make_tool(receiver.url()), q="x")
    assert outcome.error_message is not None
    assert why in outcome.error_message
    assert outcome.output == {"error": outcome.error_message}
    assert outcome.response_body == response_body
    assert len(receiver.requests) == 1  # never retried


async def test_call_webhook_tool_slow_endpoint_bounded_by_timeout(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.json({}, delay_s=10))
    tool = make_tool(receiver.url(), endpoint_timeout_ms=1000)
    outcome = await call(with_outbound(base_ctx), tool)
    assert outcome.timed_out is True
    assert outcome.response_status_code is None
    assert outcome.output == {"error": "The URL did not answer in time."}
    assert 900 <= outcome.duration_ms < 3000


@pytest.mark.parametrize("declare_length", [True, False], ids=["declared", "streamed"])
async def test_call_webhook_tool_ten_megabytes_bounded(
    base_ctx: Context, receiver: WebhookReceiver, declare_length: bool
) -> None:
    receiver.script(Reply.huge(declare_length=declare_length))
    outcome = await call(with_outbound(base_ctx), make_tool(receiver.url()))
    assert outcome.output == {"error": "The URL answered with more than 64 KiB."}
    assert receiver.bytes_sent < 8 * 1024 * 1024


async def test_call_webhook_tool_redirect_not_followed(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    receiver.script(Reply.redirect(receiver.url("/elsewhere")), Reply.json({"followed": True}))
    outcome = await call(with_outbound(base_ctx), make_tool(receiver.url("/hook")))
    assert outcome.response_status_code == 302
    assert outcome.error_message is not None
    assert "redirects are not followed" in outcome.error_message
    assert [request.path for request in receiver.requests] == ["/hook"]


async def test_call_webhook_tool_private_address_refused_unless_allowed(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    tool = make_tool(receiver.url())
    refused = await call(with_outbound(base_ctx, policy=AddressPolicy(allow_http=True)), tool)
    assert refused.error_message is not None
    assert "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS=true" in refused.error_message
    assert refused.response_status_code is None
    assert receiver.requests == []
    allowed = await call(with_outbound(base_ctx), tool)
    assert allowed.response_status_code == 200


async def test_call_webhook_tool_http_refused_by_default(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    outcome = await call(base_ctx, make_tool(receiver.url()))
    assert outcome.error_message is not None
    assert "PARLEY_OUTBOUND_ALLOW_HTTP=true" in outcome.error_message
    assert receiver.requests == []


async def test_call_webhook_tool_dns_rebinding_refused_at_next_call(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    """The host's first answer is public, its second loopback: the address is checked at
    each call, and the request goes to the address that was checked."""
    http, connected = loopback_internet(PUBLIC)
    client = OutboundClient(http, resolve=answers([PUBLIC], ["127.0.0.1"]))
    ctx = with_outbound(base_ctx, policy=AddressPolicy(allow_http=True), client=client)
    tool = make_tool(f"http://tools.example.com:{receiver.port}/hook")
    try:
        first = await call(ctx, tool)
        second = await call(ctx, tool)
    finally:
        await client.aclose()
    assert first.response_status_code == 200
    assert second.error_message is not None
    assert "public addresses only" in second.error_message
    assert connected == [PUBLIC]
    (request,) = receiver.requests
    assert request.headers["host"] == f"tools.example.com:{receiver.port}"


async def test_call_webhook_tool_logs_no_header_value_or_secret(
    base_ctx: Context, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    tool = make_tool(
        receiver.url(), endpoint_headers={"Authorization": "Bearer sk-live-do-not-log"}
    )
    with caplog.at_level(logging.DEBUG):
        await call(with_outbound(base_ctx), tool, card="4242-4242")
    (request,) = receiver.requests
    assert "sk-live-do-not-log" not in caplog.text
    assert SECRET.removeprefix("whsec_") not in caplog.text
    assert request.headers["webhook-signature"] not in caplog.text
    assert "4242-4242" not in caplog.text
    (line,) = [r for r in caplog.records if r.name == "parley.services.webhook_tools"]
    assert line.getMessage().startswith("webhook tool get_weather: 200 in ")


async def test_call_webhook_tool_unusable_secret_is_error_output(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    tool = make_tool(receiver.url(), signing_secret="not-a-secret")
    outcome = await call(with_outbound(base_ctx), tool)
    assert outcome.output == {"error": "The tool cannot be called: its signing secret is unusable."}
    assert receiver.requests == []


def profile_tool(url: str) -> Tool:
    return make_tool(
        url,
        parameters={
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "required": ["id"],
        },
        parameter_locations={"id": "url_path"},
    )


@pytest.mark.parametrize("value", [".", ".."])
async def test_url_path_dot_segment_value_is_error_output_nothing_sent(
    base_ctx: Context, receiver: WebhookReceiver, value: str
) -> None:
    tool = profile_tool(receiver.url("/api/users/{id}/profile"))
    outcome = await call(with_outbound(base_ctx), tool, id=value)
    assert outcome.error_message is not None
    assert "dot segment" in outcome.error_message
    assert outcome.output == {"error": outcome.error_message}
    assert outcome.response_status_code is None
    assert receiver.requests == []


@pytest.mark.parametrize(
    ("value", "path"),
    [("...", "/api/users/.../profile"), ("../admin", "/api/users/..%2Fadmin/profile"),
     ("%2e%2e", "/api/users/%252e%252e/profile"), (".hidden", "/api/users/.hidden/profile")],
)  # fmt: skip
async def test_url_path_value_percent_encoded_as_one_segment(
    base_ctx: Context, receiver: WebhookReceiver, value: str, path: str
) -> None:
    tool = profile_tool(receiver.url("/api/users/{id}/profile"))
    outcome = await call(with_outbound(base_ctx), tool, id=value)
    assert outcome.error_message is None
    (request,) = receiver.requests
    assert request.path == path


async def test_webhook_tool_call_user_agent_is_parley_tools(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    await call(with_outbound(base_ctx), make_tool(receiver.url()))
    own = make_tool(receiver.url(), endpoint_headers={"User-Agent": "Acme-Agent/2"})
    await call(with_outbound(base_ctx), own)
    first, second = receiver.requests
    assert first.headers["user-agent"] == "Parley-Tools"
    assert second.headers["user-agent"] == "Acme-Agent/2"  # the tool's own header wins


async def test_webhook_tool_call_stored_framing_headers_never_sent(
    base_ctx: Context, receiver: WebhookReceiver
) -> None:
    """A tool stored before framing headers were refused still cannot frame the request."""
    framing = {"Transfer-Encoding": "chunked", "Connection": "close", "TE": "trailers",
               "Upgrade": "h2c", "Keep-Alive": "timeout=1", "Proxy-Connection": "close",
               "Trailer": "X-After", "Content-Length": "1"}  # fmt: skip
    tool = make_tool(receiver.url(), endpoint_headers={**framing, "X-Api-Key": "k1"})
    outcome = await call(with_outbound(base_ctx), tool, city="Paris")
    assert outcome.error_message is None
    (request,) = receiver.requests
    assert request.json() == {"city": "Paris", "conversation_id": CONVERSATION_ID}
    assert request.headers["x-api-key"] == "k1"
    for name in ("transfer-encoding", "te", "upgrade", "keep-alive", "proxy-connection", "trailer"):
        assert name not in request.headers
    assert request.headers.get("connection", "keep-alive") == "keep-alive"
