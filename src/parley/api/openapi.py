"""The OpenAPI document: our error envelope everywhere, no framework 422, bearer auth."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import BaseRoute

PUBLIC_PATHS = {"/health", "/v1/telephony/twilio/voice"}
"""Paths without a bearer credential (the carrier's voice webhook is signed instead)."""
ALWAYS_POSSIBLE = {
    "400": "Invalid request: parameters, body, credentials or the HTTP message itself.",
    "503": "A dependency is unavailable; see `Retry-After`.",
}
"""Answers any operation can give, documented on every one of them: a malformed request or
parameter (400), a database that is down (503), and, off the public paths, a missing or
invalid credential (401)."""

WEBSOCKET_DESCRIPTION = """

## Conversation WebSocket: `GET /v1/sts/ws`

OpenAPI cannot describe a WebSocket; this is its summary (the repository's docs/api.md has
every field and docs/conversations.md an example per message).

**Handshake.** One credential: `?jwt=`, `?session_token=` or `Authorization: Bearer`
(an API key only in the header). With a JWT the conversation is its `conversation_id`
claim, created by this first connection, and the handshake spends the token's `jti`.
Optional `?conversation_id=`. A refused handshake is an HTTP answer with the REST status
and error body.

**Frames** are JSON text objects with a `type`, at most 1 MiB.

| client → server | fields |
|---|---|
| `config` | `agent`, `project`?, `input_format`?, `output_format`?, `system_prompt`?, \
`welcome_message`?, `voice_id`?, `tools`?, `template_variables`? (first, within 10 s) |
| `audio_chunk` | `audio`: base64, at most 40 ms |
| `say` | `text` |
| `generate_reply` | `user_message`?, `system_message`? |
| `set_external_id` | `external_id` |
| `update_system_prompt` | `system_prompt` |
| `mute` / `unmute` | |
| `tool_call_output` | `tool_call_id`, `output` (a WebSocket tool's answer) |
| `update_tools_subset` | `tools` (names or inline WebSocket tools) |
| `reset` | `config` (a `config`'s members: the conversation goes on with them) |
| `add_system_message` | `system_message` (joins the model's history; no reply) |

| server → client | fields |
|---|---|
| `conversation_created` | `conversation_id` |
| `ready_to_start_conversation` | |
| `user_started_speaking` / `user_finished_speaking` | |
| `input_text` | `text`, `language` |
| `input_cancelled` | (speech started, but no words came of it) |
| `assistant_started_speaking` / `assistant_finished_speaking` | |
| `audio_chunk` | `audio` (100 ms), `text` |
| `interrupted_response` | `text` |
| `assistant_ended_conversation` | |
| `tool_call` | `tool_call_id`, `tool_name`, `parameters` (answer with `tool_call_output`) |
| `tool_call_output_processed` | `tool_call_id`, `tool`, `parameters`, `output`, `endpoint_*`, \
`response_status_code`, `duration_ms`, `timed_out`, `error_message` |
| `tool_call_interrupted` | `tool_call_id`, `tool_name` |
| `error` | `error`: `{message, code}`, `param_errors`? |
| `warning` | `warning`: `{message, code}` |

**Close codes:** 1000 (ended), 1008 (`config timeout`, `agent_disabled`,
`conversation_ended`, `conversation_exists`, `token expired`, `session token revoked`),
1009 (`message too big`).
"""


def build_openapi(app: FastAPI, *, unmounted: Sequence[BaseRoute] = ()) -> dict[str, Any]:
    """Return the OpenAPI schema, built once and cached on the app.

    `unmounted` describes operations that a plain Starlette route serves (`GET /health`),
    which FastAPI cannot document by itself.
    """
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=[*unmounted, *app.routes],
    )
    schema["info"]["description"] = (schema["info"].get("description") or "") + (
        WEBSOCKET_DESCRIPTION
    )
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`parley_sk_…`), a session token (`parley_st_…`) or a JWT.",
    }
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            possible = dict(ALWAYS_POSSIBLE)
            if path not in PUBLIC_PATHS:
                operation["security"] = [{"bearer": []}]
                possible["401"] = "Missing or invalid credential."
            for status, description in possible.items():
                responses.setdefault(status, _error_response(description))
    app.openapi_schema = schema
    return schema


def _error_response(description: str) -> dict[str, Any]:
    envelope = {"$ref": "#/components/schemas/ErrorOut"}
    return {"description": description, "content": {"application/json": {"schema": envelope}}}
