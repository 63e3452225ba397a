"""Issue #9 finding 6: NUL, other control characters and unpaired surrogates are refused at
the boundary with 400 `validation_error` naming the field, the same on SQLite and
PostgreSQL (which cannot store NUL in text); never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.api.helpers import assert_error
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio


def raw_json(body: dict[str, Any]) -> dict[str, Any]:
    """Request arguments sending `body` as JSON text, escapes kept (lone surrogates too)."""
    return {
        "content": json.dumps(body, ensure_ascii=True).encode(),
        "headers": {"content-type": "application/json"},
    }


AGENTS, CONVERSATIONS, JWT = "/v1/agents", "/v1/conversations", "/v1/auth/jwt"
SESSIONS, PROMPT = "/v1/auth/session_token", "system_prompt"
BODIES = [
    ("agent-system-prompt-nul", AGENTS, {"name": "a1", PROMPT: "Be\x00 brief"}, PROMPT),
    ("agent-system-prompt-surrogate", AGENTS, {"name": "a1", PROMPT: "\ud800"}, PROMPT),
    ("agent-welcome-nul", AGENTS, {"name": "a1", "welcome_message": "\x00"}, "welcome_message"),
    ("agent-voice-tab", AGENTS, {"name": "a1", "voice_id": "us\tfemale"}, "voice_id"),
    ("agent-project-nul", AGENTS, {"name": "a1", "project": "ma\x00in"}, "project"),
    ("agent-name-nul", AGENTS, {"name": "a\x00"}, "name"),
    ("project-name-nul", "/v1/projects", {"name": "p\x00"}, "name"),
    ("api-key-name-nul", "/v1/api_keys", {"name": "ci\x00"}, "name"),
    ("api-key-name-c1", "/v1/api_keys", {"name": "ci\x9b"}, "name"),
    ("conversation-id-nul", CONVERSATIONS, {"agent": "a1", "id": "c\x00"}, "id"),
    ("conversation-agent-nul", CONVERSATIONS, {"agent": "a\x001"}, "agent"),
    ("session-ids-nul", SESSIONS, {"conversation_ids": ["c\x00"]}, "conversation_ids"),
    ("jwt-issuer-nul", JWT, {"issuers": ["i\x00"], "public_keys": ["x"]}, "issuers.0"),
    ("jwt-jwk-member-nul", JWT, {"issuers": ["i"], "public_keys": [{"x": "\x00"}]}, "public_keys"),
    ("jwt-pem-nul", JWT, {"issuers": ["i"], "public_keys": ["-----\x00"]}, "public_keys"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "field"), [b[1:] for b in BODIES], ids=[b[0] for b in BODIES]
)
async def test_body_control_characters_400_param_errors(
    tenant: Tenant, path: str, body: dict[str, Any], field: str
) -> None:
    method = "PUT" if path == "/v1/auth/jwt" else "POST"
    response = await tenant.client.request(method, path, **raw_json(body))
    payload = assert_error(response, 400, "validation_error")
    assert any(key.startswith(field) for key in payload["param_errors"]), payload


async def test_agent_update_system_prompt_nul_400(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.patch(
        f"/v1/agents/{agent['id']}", json={"system_prompt": "a\x00b"}
    )
    assert set(assert_error(response, 400, "validation_error")["param_errors"]) == {"system_prompt"}


async def test_free_text_newlines_and_tabs_accepted(tenant: Tenant, make_agent: MakeAgent) -> None:
    agent = await make_agent(
        tenant, system_prompt="Line one.\n\tLine two.", welcome_message="Hi\r\n"
    )
    assert agent["system_prompt"] == "Line one.\n\tLine two."


PATHS = [
    ("agent-nul", "/v1/agents/%00", "nameOrId"),
    ("agent-newline", "/v1/agents/a%0Ab", "nameOrId"),
    ("agent-surrogate", "/v1/agents/%ED%A0%80", None),
    ("project-nul", "/v1/projects/%00", "nameOrId"),
    ("agent-project-query-nul", "/v1/agents?project=%00", "project"),
    ("conversation-nul", "/v1/conversations/c%00", "id"),
    ("conversations-agent-query-nul", "/v1/conversations?agent=%00", "agent"),
    ("api-key-nul", "/v1/api_keys/key%00", "id"),
]


@pytest.mark.parametrize(("path", "field"), [p[1:] for p in PATHS], ids=[p[0] for p in PATHS])
async def test_path_and_query_control_characters_400(
    tenant: Tenant, path: str, field: str | None
) -> None:
    method = "DELETE" if path.startswith("/v1/api_keys/") else "GET"
    response = await tenant.client.request(method, path)
    if field is None:
        # Not UTF-8 at all: refused before any parameter is read, still an envelope.
        assert response.status_code in (400, 404), response.text
        assert "error" in response.json()
        return
    assert set(assert_error(response, 400, "validation_error")["param_errors"]) == {field}


async def test_session_token_delete_nul_400(tenant: Tenant) -> None:
    response = await tenant.client.delete("/v1/auth/session_token/sess%00")
    assert set(assert_error(response, 400, "validation_error")["param_errors"]) == {"id"}


async def test_conversation_id_over_128_refused_on_create(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    agent = await make_agent(tenant)
    response = await tenant.client.post(
        "/v1/conversations", json={"agent": agent["name"], "id": "c" * 129}
    )
    assert "id" in assert_error(response, 400, "validation_error")["param_errors"]
