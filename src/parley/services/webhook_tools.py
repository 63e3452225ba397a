"""Calling a webhook tool (API.md section 12): one signed request, never retried.

The request:

- `POST` (the default): a JSON body of the `request_body` parameters plus
  `"conversation_id"`; `query_string` parameters go to the query;
- `GET`: the parameters in the query string, `conversation_id` too (a GET has no body, so
  a parameter placed in `request_body` goes to the query as well);
- `url_path` parameters fill the `{name}` placeholders of the URL's path only, each value
  percent-encoded as one path segment (`/`, `?`, `#` and `%` included); a value `.` or `..`
  (a dot segment, which would climb the path) makes the output an error, nothing sent;
- a parameter's location comes from `tool.parameter_locations`, else from the `location` of
  its item in the SDK's flat-list `parameters`, else it is `request_body` for POST and
  `query_string` for GET;
- headers: the tool's `endpoint_headers` (framing and routing ones dropped: they are
  refused at creation, services/tools.py), `User-Agent: Parley-Tools` unless they name
  one, then `Content-Type` (POST), `Idempotency-Key:
  <call_id>` and the Standard Webhooks headers (`webhook-id` = the call ID, keyed by the
  tool's signing secret; the empty body is signed for GET), which a header of the tool
  cannot override;
- through the process's outbound client under `ctx.outbound_policy` (the resolved address
  checked at each call, no redirect followed), within `endpoint_timeout_ms` (default 5000)
  and reading at most 64 KiB.

A 2xx JSON answer is the output; anything else (status, redirect, timeout, not JSON, a
refused address) becomes `{"error": "<why>"}` and the conversation goes on: this function
never raises for an endpoint's failure. It logs one line (tool name, status, duration),
never a header, a body or the secret.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from parley.clock import utcnow
from parley.outbound import FRAMING_HEADERS, OutboundError, OutboundTimeout, signature_headers
from parley.records import Tool
from parley.services.context import Context

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS: Final = 5000
MAX_ANSWER_BYTES: Final = 64 * 1024
LOCATIONS: Final = ("request_body", "query_string", "url_path")
USER_AGENT: Final = "Parley-Tools"
PROTECTED_HEADERS: Final = FRAMING_HEADERS | {
    "content-type",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
}
"""Headers the service sets; a tool's `endpoint_headers` cannot replace them."""
DOT_SEGMENTS: Final = frozenset({".", ".."})


class UnsendableCall(ValueError):
    """The call cannot be made as the arguments ask (nothing is sent); the message says why."""


@dataclass(frozen=True, slots=True)
class WebhookToolOutcome:
    """What one webhook tool call did, as `tool_call_output_processed` reports it."""

    output: Any
    """The 2xx JSON answer, else `{"error": "<why>"}`."""
    endpoint_method: str
    endpoint_url: str
    """As called, query included."""
    endpoint_called_at: datetime
    request_body: Any
    """The JSON sent (None for GET)."""
    response_body: Any
    """The answer parsed as JSON, else its text, else None (no answer or an empty one)."""
    response_status_code: int | None
    duration_ms: int
    timed_out: bool
    error_message: str | None


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    url: str
    body: dict[str, Any] | None


async def call_webhook_tool(
    ctx: Context,
    tool: Tool,
    *,
    call_id: str,
    conversation_id: str,
    arguments: Mapping[str, Any],
) -> WebhookToolOutcome:
    """Call `tool`'s endpoint once with `arguments`; never raise for the endpoint's failure."""
    called_at = utcnow(ctx.clock)
    started = ctx.clock.monotonic()
    try:
        request = build_request(tool, conversation_id=conversation_id, arguments=arguments)
    except UnsendableCall as unsendable:
        return _not_sent(tool, unsendable, called_at)
    content = _json_bytes(request.body) if request.body is not None else b""
    status: int | None = None
    response_body: Any = None
    timed_out = False
    try:
        response = await ctx.outbound.request(
            request.method,
            request.url,
            policy=ctx.outbound_policy,
            headers=_headers(tool, call_id, ctx.clock.time(), content, request.method),
            content=content if request.method != "GET" else None,
            timeout_s=(tool.endpoint_timeout_ms or DEFAULT_TIMEOUT_MS) / 1000,
            max_bytes=MAX_ANSWER_BYTES,
        )
    except OutboundError as error:
        timed_out = isinstance(error, OutboundTimeout)
        why: str | None = error.message
    except ValueError:  # a signing secret that is not `whsec_…` base64
        why = "The tool cannot be called: its signing secret is unusable."
    else:
        status = response.status
        response_body, parsed = _parse(response.body)
        why = _refusal(status, parsed, response.is_redirect)
    output = response_body if why is None else {"error": why}
    duration_ms = max(0, round((ctx.clock.monotonic() - started) * 1000))
    log.info(
        "webhook tool %s: %s in %d ms",
        tool.name,
        status if status is not None else ("timeout" if timed_out else "no answer"),
        duration_ms,
    )
    return WebhookToolOutcome(
        output=output,
        endpoint_method=request.method,
        endpoint_url=request.url,
        endpoint_called_at=called_at,
        request_body=request.body,
        response_body=response_body,
        response_status_code=status,
        duration_ms=duration_ms,
        timed_out=timed_out,
        error_message=why,
    )


def _not_sent(tool: Tool, unsendable: UnsendableCall, called_at: datetime) -> WebhookToolOutcome:
    """The outcome of a call refused before anything was sent."""
    why = str(unsendable)
    log.info("webhook tool %s: not sent", tool.name)
    return WebhookToolOutcome(
        output={"error": why},
        endpoint_method=(tool.endpoint_method or "POST").upper(),
        endpoint_url=tool.endpoint_url or "",
        endpoint_called_at=called_at,
        request_body=None,
        response_body=None,
        response_status_code=None,
        duration_ms=0,
        timed_out=False,
        error_message=why,
    )


def build_request(tool: Tool, *, conversation_id: str, arguments: Mapping[str, Any]) -> _Request:
    """The method, the URL (path filled, query added) and the JSON body of one call.

    Raises UnsendableCall for a `url_path` value that is a dot segment."""
    method = (tool.endpoint_method or "POST").upper()
    default = "query_string" if method == "GET" else "request_body"
    locations = parameter_locations(tool)
    body: dict[str, Any] = {}
    query: list[tuple[str, str]] = []
    path_values: dict[str, str] = {}
    for name, value in arguments.items():
        location = locations.get(name) or default
        if location == "url_path":
            path_values[name] = _as_text(value)
        elif location == "query_string" or method == "GET":
            query.append((name, _as_text(value)))
        else:
            body[name] = value
    if method == "GET":
        query.append(("conversation_id", conversation_id))
    else:
        body["conversation_id"] = conversation_id
    url = _fill_url(tool.endpoint_url or "", path_values, query)
    return _Request(method=method, url=url, body=None if method == "GET" else body)


def parameter_locations(tool: Tool) -> dict[str, str]:
    """Each parameter's location: `parameter_locations`, else the flat list's `location`."""
    if tool.parameter_locations is not None:
        return {name: loc for name, loc in tool.parameter_locations.items() if loc in LOCATIONS}
    found: dict[str, str] = {}
    if isinstance(tool.parameters, list):
        for item in tool.parameters:
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                location = item.get("location")
                if location in LOCATIONS:
                    found[item["name"]] = location
    return found


def _fill_url(template: str, path_values: Mapping[str, str], query: list[tuple[str, str]]) -> str:
    """Fill `{name}` placeholders in the path only (encoded: a value cannot add a segment,
    a query or a host), and append the query parameters to any the URL already has."""
    try:
        parts = urlsplit(template)
    except ValueError:  # e.g. an unclosed IPv6 bracket: the address policy refuses it
        return template
    path = parts.path
    for name, value in path_values.items():
        if value in DOT_SEGMENTS:
            raise UnsendableCall(
                f"The parameter {name} cannot be {value!r}: a url_path value is one path "
                "segment, and a dot segment would change the path."
            )
        path = path.replace("{" + name + "}", quote(value, safe=""))
    extra = urlencode(query)
    joined = "&".join(piece for piece in (parts.query, extra) if piece)
    return urlunsplit(parts._replace(path=path, query=joined))


def _headers(tool: Tool, call_id: str, now: float, content: bytes, method: str) -> dict[str, str]:
    headers = {
        name: value
        for name, value in (tool.endpoint_headers or {}).items()
        if name.lower() not in PROTECTED_HEADERS
    }
    if not any(name.lower() == "user-agent" for name in headers):
        headers["User-Agent"] = USER_AGENT
    if method != "GET":
        headers["Content-Type"] = "application/json"
    headers["Idempotency-Key"] = call_id
    headers |= signature_headers(
        [tool.signing_secret], msg_id=call_id, timestamp=int(now), body=content
    )
    return headers


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _as_text(value: Any) -> str:
    """A parameter as it appears in a URL: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _parse(body: bytes) -> tuple[Any, bool]:
    """The answer as JSON (and True), else as text, else None for an empty one."""
    if not body:
        return None, False
    try:
        return json.loads(body), True
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        return body.decode("utf-8", "replace"), False


def _refusal(status: int, parsed: bool, redirect: bool) -> str | None:
    """Why this answer is not the tool's output, or None when it is."""
    if 300 <= status < 400 or redirect:
        return f"The endpoint redirected (HTTP {status}); redirects are not followed."
    if not 200 <= status < 300:
        return f"The endpoint answered HTTP {status}."
    if not parsed:
        return "The endpoint did not answer with JSON."
    return None
