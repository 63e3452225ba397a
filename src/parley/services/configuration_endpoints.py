"""An agent's configuration endpoint (API.md section 17): the field's rules, and the one
signed call at each conversation's start.

Rules:
1. `url` follows webhook tools' rule (https on a public address unless the operator allows
   otherwise: `AddressPolicy.static_refusal`; the resolved address is checked again at
   each call); `headers` name no framing or routing header (services/tools.py's list);
   `timeout_ms` is 100-10000 (default 3000).
2. Setting an endpoint on an agent that has none makes its signing secret (`whsec_` + 32
   random bytes), shown once, in the answer of that change; changing the endpoint keeps
   the secret; removing it (`null`) drops the secret, so setting one again makes a new one.
3. Header values (often the customer's credentials) and the secret are stored sealed. The
   Agent shape shows the header names with each value masked (`MASK`): the Agent travels
   in webhook events and listings. In a change, a header given as the mask keeps its
   stored value, so an SDK read-modify-write loses nothing.
4. The call (`fetch_overrides`): a `POST` of `{"project": {"name"}, "agent": {"name",
   "welcome_message", "system_prompt", "tools", "boosted_keywords"}, "conversation_id",
   "from_phone_number"?, "to_phone_number"?}` (the phone numbers on a call only) with the
   endpoint's headers, `User-Agent: Parley-Configuration` unless they name one,
   `Content-Type: application/json` and Standard Webhooks headers (`webhook-id` = the
   conversation ID, keyed by the agent's secret), which a header cannot override; through
   the process's outbound client (no redirect followed, at most 64 KiB read) within
   `timeout_ms`. Never retried: the conversation is waiting.
5. The answer: a 2xx JSON object whose members are among `welcome_message` (text, or null:
   no welcome), `system_prompt` (text), `template_variables` ({name: text}), `tools` (tool
   names) and `boosted_keywords` (at most 100 texts of at most 64 chars); each one given
   overrides the agent's (and the `config`'s) for this conversation. No answer in time:
   ConfigurationEndpointTimedOut; no answer at all (refused address, connection failure),
   a redirect or an error status: ConfigurationEndpointError; anything else (not JSON, not
   an object, an unknown member, a wrong type, too large): ConfigurationEndpointInvalidResponse.
   The caller (services/live/starting.py) refuses, the same way, overrides the
   conversation cannot use (an unknown tool, a placeholder without a value).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

from parley.errors import (
    ConfigurationEndpointError,
    ConfigurationEndpointInvalidResponse,
    ConfigurationEndpointTimedOut,
    ValidationFailed,
)
from parley.outbound import (
    FRAMING_HEADERS,
    AddressPolicy,
    OutboundError,
    OutboundTimeout,
    OutboundTooLarge,
    new_signing_secret,
    signature_headers,
)
from parley.records import (
    UNSET,
    CallInfo,
    ConfigurationEndpoint,
    ConfigurationEndpointSpec,
    Unset,
)
from parley.services.context import Context
from parley.services.event_payloads import HEADER_MASK
from parley.services.tools import FRAMING_NAMES

log = logging.getLogger(__name__)

FIELD: Final = "configuration_endpoint"
DEFAULT_TIMEOUT_MS: Final = 3000
TIMEOUT_MS_RANGE: Final = (100, 10_000)
MASK: Final = HEADER_MASK
"""How the Agent shape shows a header's value (rule 3; services/event_payloads.py)."""
USER_AGENT: Final = "Parley-Configuration"
MAX_ANSWER_BYTES: Final = 64 * 1024
MAX_TEXT: Final = {"welcome_message": 2_000, "system_prompt": 20_000}
MAX_KEYWORDS: Final = 100
MAX_KEYWORD_CHARS: Final = 64
MAX_TOOLS: Final = 64
MAX_VARIABLES: Final = 100
PROTECTED_HEADERS: Final = FRAMING_HEADERS | {
    "content-type",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
}
"""Headers the service sets; the endpoint's `headers` cannot replace them."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """What the endpoint's answer overrides for one conversation (UNSET: not given)."""

    welcome_message: str | Unset | None = UNSET
    """None: no welcome."""
    system_prompt: str | Unset = UNSET
    template_variables: Mapping[str, str] | Unset = UNSET
    tools: tuple[str, ...] | Unset = UNSET
    boosted_keywords: tuple[str, ...] | Unset = UNSET


@dataclass(frozen=True, slots=True)
class AgentView:
    """The agent as the conversation would run it, as the call describes it (rule 4)."""

    project_name: str
    name: str
    welcome_message: str | None
    system_prompt: str
    tools: Sequence[str]
    boosted_keywords: Sequence[str]


def issue(
    ctx: Context,
    spec: ConfigurationEndpointSpec,
    *,
    current: ConfigurationEndpoint | None,
) -> ConfigurationEndpoint:
    """Check `spec` (rule 1) and return it sealed (rule 3), with the current secret, or a
    new one (in clear as `issued_secret` too) when the agent has none (rule 2)."""
    checked = check(spec, ctx.outbound_policy)
    stored = current.headers if current is not None else {}
    headers: dict[str, str] = {}
    for name, value in checked.headers.items():
        if value == MASK:
            kept = next((v for n, v in stored.items() if n.lower() == name.lower()), None)
            if kept is None:
                _refuse(f"headers: {name} is the mask, but the endpoint has no such header")
            headers[name] = kept  # still sealed
        else:
            headers[name] = ctx.secrets.seal(value)
    timeout_ms = checked.timeout_ms or DEFAULT_TIMEOUT_MS
    if current is not None:
        return ConfigurationEndpoint(checked.url, headers, timeout_ms, current.secret)
    secret = new_signing_secret()
    sealed = ctx.secrets.seal(secret)
    return ConfigurationEndpoint(checked.url, headers, timeout_ms, sealed, issued_secret=secret)


def check(spec: ConfigurationEndpointSpec, policy: AddressPolicy) -> ConfigurationEndpointSpec:
    """Rule 1; raise ValidationFailed naming `configuration_endpoint`."""
    if refusal := policy.static_refusal(spec.url):
        _refuse(f"url: {refusal}")
    for name in spec.headers:
        if name.lower() in FRAMING_HEADERS:
            _refuse(
                f"headers may not name {name}: framing and routing headers ("
                + ", ".join(FRAMING_NAMES)
                + ") are the service's"
            )
    low, high = TIMEOUT_MS_RANGE
    if spec.timeout_ms is not None and not low <= spec.timeout_ms <= high:
        _refuse(f"timeout_ms must be between {low} and {high} milliseconds")
    return spec


async def fetch_overrides(
    ctx: Context,
    endpoint: ConfigurationEndpoint,
    *,
    agent: AgentView,
    conversation_id: str,
    call_info: CallInfo | None,
) -> Overrides:
    """Call the endpoint once (rule 4) and return what its answer overrides (rule 5).

    Raises ConfigurationEndpointTimedOut, ConfigurationEndpointError or
    ConfigurationEndpointInvalidResponse. Logs one line (agent, status, duration), never a
    header, a body or the secret.
    """
    body: dict[str, Any] = {
        "project": {"name": agent.project_name},
        "agent": {
            "name": agent.name,
            "welcome_message": agent.welcome_message,
            "system_prompt": agent.system_prompt,
            "tools": list(agent.tools),
            "boosted_keywords": list(agent.boosted_keywords),
        },
        "conversation_id": conversation_id,
    }
    if call_info is not None:
        body["from_phone_number"] = call_info.from_phone_number
        body["to_phone_number"] = call_info.to_phone_number
    content = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    started = ctx.clock.monotonic()
    try:
        response = await ctx.outbound.request(
            "POST",
            endpoint.url,
            policy=ctx.outbound_policy,
            headers=_headers(ctx, endpoint, conversation_id, content),
            content=content,
            timeout_s=endpoint.timeout_ms / 1000,
            max_bytes=MAX_ANSWER_BYTES,
        )
    except OutboundTimeout:
        _log(agent, "timeout", started, ctx)
        raise ConfigurationEndpointTimedOut(
            f"The agent's configuration endpoint did not answer within {endpoint.timeout_ms} ms."
        ) from None
    except OutboundTooLarge:
        _log(agent, "too large", started, ctx)
        raise ConfigurationEndpointInvalidResponse(
            f"The agent's configuration endpoint answered more than {MAX_ANSWER_BYTES} bytes."
        ) from None
    except OutboundError as error:
        _log(agent, "no answer", started, ctx)
        raise ConfigurationEndpointError(
            f"The agent's configuration endpoint could not be called: {error.message}"
        ) from None
    _log(agent, str(response.status), started, ctx)
    if not 200 <= response.status < 300:
        raise ConfigurationEndpointError(
            f"The agent's configuration endpoint answered HTTP {response.status}."
        )
    return parse_answer(response.body)


def parse_answer(body: bytes) -> Overrides:
    """Rule 5's answer; raise ConfigurationEndpointInvalidResponse saying what is wrong."""
    try:
        answer = json.loads(body)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        _invalid("it is not JSON")
    if not isinstance(answer, dict):
        _invalid("it is not a JSON object")
    unknown = sorted(set(answer) - {*MAX_TEXT, "template_variables", "tools", "boosted_keywords"})
    if unknown:
        _invalid(f"unknown member {unknown[0]!r}")
    overrides = Overrides()
    if "welcome_message" in answer:
        welcome = answer["welcome_message"]
        if welcome is not None:
            _text("welcome_message", welcome)
        overrides = replace(overrides, welcome_message=welcome)
    if "system_prompt" in answer:
        overrides = replace(
            overrides, system_prompt=_text("system_prompt", answer["system_prompt"])
        )
    if "template_variables" in answer:
        values = answer["template_variables"]
        if not isinstance(values, dict) or len(values) > MAX_VARIABLES:
            _invalid(f"template_variables must be an object of at most {MAX_VARIABLES} texts")
        if not all(isinstance(value, str) for value in values.values()):
            _invalid("template_variables' values must be texts")
        overrides = replace(overrides, template_variables=dict(values))
    if "tools" in answer:
        tools = _texts("tools", answer["tools"], MAX_TOOLS, 64)
        overrides = replace(overrides, tools=tools)
    if "boosted_keywords" in answer:
        keywords = _texts("boosted_keywords", answer["boosted_keywords"], MAX_KEYWORDS, 64)
        overrides = replace(overrides, boosted_keywords=keywords)
    return overrides


def _headers(
    ctx: Context, endpoint: ConfigurationEndpoint, conversation_id: str, content: bytes
) -> dict[str, str]:
    headers = {
        name: ctx.secrets.unseal(value)
        for name, value in endpoint.headers.items()
        if name.lower() not in PROTECTED_HEADERS
    }
    if not any(name.lower() == "user-agent" for name in headers):
        headers["User-Agent"] = USER_AGENT
    headers["Content-Type"] = "application/json"
    secret = ctx.secrets.unseal(endpoint.secret)
    timestamp = int(ctx.clock.time())
    return headers | signature_headers(
        [secret], msg_id=conversation_id, timestamp=timestamp, body=content
    )


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        _invalid(f"{name} must be a text")
    if len(value) > MAX_TEXT[name]:
        _invalid(f"{name} is longer than {MAX_TEXT[name]} characters")
    return value


def _texts(name: str, value: object, most: int, chars: int) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > most:
        _invalid(f"{name} must be a list of at most {most} texts")
    if not all(isinstance(item, str) and 0 < len(item) <= chars for item in value):
        _invalid(f"{name} must hold texts of 1 to {chars} characters")
    return tuple(value)


def _log(agent: AgentView, outcome: str, started: float, ctx: Context) -> None:
    duration_ms = max(0, round((ctx.clock.monotonic() - started) * 1000))
    log.info("configuration endpoint of agent %s: %s in %d ms", agent.name, outcome, duration_ms)


def _invalid(why: str) -> NoReturn:
    raise ConfigurationEndpointInvalidResponse(
        f"The agent's configuration endpoint answered an invalid configuration: {why}."
    )


def _refuse(message: str) -> NoReturn:
    raise ValidationFailed(param_errors={FIELD: message})
