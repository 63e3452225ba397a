"""Reading the tool form (API.md section 12) into a ToolSpec or a ToolPatch.

Rules:
1. The form shows the fields of both tool types (no script hides them); the fields of the
   type not chosen are ignored, so a WebSocket tool never carries a stray endpoint method.
2. `parameters`, `parameter_locations` and `endpoint_headers` are JSON text; text that is
   not JSON is refused naming the field. Sizes and shapes are those of the REST API's wire
   models (api/tool_schemas.py); the rules between fields are services/tools.py's.
3. Endpoint headers may hold credentials, so their values are never shown again: pages list
   the names with masked values, a refused form does not type them back, and on the edit
   form an empty headers box keeps the stored headers (`clear_headers` removes them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, Final

from starlette.datastructures import FormData

from parley.errors import ValidationFailed
from parley.records import Tool, ToolPatch, ToolSpec
from parley.text import LABEL_RULE, TEXT_RULE, is_label, is_text
from parley.web import forms

TOOL_TYPES: Final = ("custom_webhook", "custom_websocket")
EXECUTION_MODES: Final = ("sync", "async")
ENDPOINT_METHODS: Final = ("POST", "GET")
SECRET_FIELDS: Final = ("endpoint_headers",)
"""Fields a refused form leaves empty (rule 3)."""
MASK: Final = "••••••"
MAX_HEADERS: Final = 20
MAX_JSON_LENGTH: Final = 64_000
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")


def tool_spec(form: FormData) -> ToolSpec:
    """Read a whole tool from the form (rule 1)."""
    kind = _choice(form, "type", TOOL_TYPES)
    description = forms.text(form, "description", max_length=4096)
    if not is_text(description):
        raise ValidationFailed(param_errors={"description": TEXT_RULE})
    spec = ToolSpec(
        name=forms.text(form, "name", max_length=64, required=True),
        description=description,
        type=kind,
        execution_mode=_choice(form, "execution_mode", EXECUTION_MODES),
        parameters=json_field(form, "parameters", default=[]),
        require_speech_before_tool_call=forms.checked(form, "require_speech_before_tool_call"),
    )
    if kind == "custom_websocket":
        timeout = _milliseconds(form, "tool_call_output_timeout_ms")
        return replace(spec, tool_call_output_timeout_ms=timeout)
    url = forms.text(form, "endpoint_url", max_length=2048) or None
    if url is not None and not is_label(url):
        raise ValidationFailed(param_errors={"endpoint_url": LABEL_RULE})
    return replace(
        spec,
        parameter_locations=_locations(form),
        endpoint_method=_choice(form, "endpoint_method", ENDPOINT_METHODS),
        endpoint_url=url,
        endpoint_headers=_headers(form),
        endpoint_timeout_ms=_milliseconds(form, "endpoint_timeout_ms"),
    )


def tool_patch(form: FormData, current: Tool) -> ToolPatch:
    """Read the edit form into a patch of the fields that differ from `current` (rule 3)."""
    spec = tool_spec(form)
    wanted = {f.name: getattr(spec, f.name) for f in fields(ToolSpec)}
    keep_headers = spec.type == "custom_webhook" and not forms.checked(form, "clear_headers")
    if keep_headers and spec.endpoint_headers is None:
        del wanted["endpoint_headers"]  # an empty box keeps what is stored
    changed = {name: value for name, value in wanted.items() if getattr(current, name) != value}
    return ToolPatch(**changed)


def json_field(form: FormData, field: str, *, default: Any) -> Any:
    """Parse a JSON text area (empty: `default`); every string in it must be storable text."""
    raw = forms.text(form, field, max_length=MAX_JSON_LENGTH)
    if not raw:
        return default
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise ValidationFailed(
            param_errors={field: f"is not valid JSON ({error.msg} at {where})"}
        ) from None
    except (ValueError, RecursionError):  # NaN, a huge integer, nesting past the stack
        raise ValidationFailed(param_errors={field: "is not valid JSON"}) from None
    pending = [value]
    while pending:  # bounded: each JSON value is visited once
        item = pending.pop()
        if isinstance(item, str) and not is_text(item):
            raise ValidationFailed(param_errors={field: TEXT_RULE})
        if isinstance(item, dict):
            pending.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            pending.extend(item)
    return value


def masked_headers(headers: Mapping[str, str] | None) -> list[str]:
    """The header lines a page may show: each name with its value masked."""
    return [f"{name}: {MASK}" for name in sorted(headers or {})]


def pretty_json(value: Any) -> str:
    """A JSON value as an operator reads and edits it."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (RFC 8259), though Python's parser takes them."""
    raise ValueError(name)


def _headers(form: FormData) -> dict[str, str] | None:
    value = json_field(form, "endpoint_headers", default=None)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed(param_errors={"endpoint_headers": "must be a JSON object"})
    if len(value) > MAX_HEADERS:
        raise ValidationFailed(param_errors={"endpoint_headers": f"at most {MAX_HEADERS}"})
    for name, header in value.items():
        # The header's name may be shown in the error; its value never is.
        if not _HEADER_NAME.fullmatch(name):
            message = f"{name[:40]!r} is not an HTTP header name"
            raise ValidationFailed(param_errors={"endpoint_headers": message})
        if not isinstance(header, str) or len(header) > 4096 or not is_label(header):
            message = f"the value of {name} must be text of at most 4096 characters, {LABEL_RULE}"
            raise ValidationFailed(param_errors={"endpoint_headers": message})
    return value


def _locations(form: FormData) -> dict[str, str] | None:
    value = json_field(form, "parameter_locations", default=None)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        message = 'must be a JSON object such as {"city": "query_string"}'
        raise ValidationFailed(param_errors={"parameter_locations": message})
    return value


def _choice(form: FormData, field: str, allowed: tuple[str, ...]) -> str:
    value = forms.text(form, field, max_length=64) or allowed[0]
    if value not in allowed:
        raise ValidationFailed(param_errors={field: "must be one of " + ", ".join(allowed)})
    return value


def _milliseconds(form: FormData, field: str) -> int | None:
    raw = forms.text(form, field, max_length=7)
    if not raw:
        return None  # the service's default
    if not (raw.isascii() and raw.isdigit()):  # int() takes other digits too
        raise ValidationFailed(param_errors={field: "must be a number of milliseconds"})
    return int(raw)
