"""Issue #9 findings 6 and 8 on the socket: NUL and control characters in frames get an
`error` frame with `param_errors` while the socket stays open; a JWT whose
`conversation_id` breaks the conversation ID rule is refused at the handshake with the
REST envelope (401 `invalid_token`), on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from websockets.asyncio.client import connect

from tests.e2e.conftest import Customer, Server
from tests.e2e.test_ws import configure, expect_refusal, receive

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

NUL_ID = "c\x00"


@pytest.mark.parametrize(
    "conversation_id",
    ["c\x00", "c" * 5000, "c" * 129, "c\n1", "c/1"],
    ids=["nul", "5000-chars", "129-chars", "newline", "slash"],
)
async def test_ws_jwt_conversation_id_breaking_rule_401_invalid_token(
    server: Server, customer: Customer, conversation_id: str
) -> None:
    token = customer.jwt(conversation_id)
    await expect_refusal(f"{server.ws}/v1/sts/ws?jwt={token}", 401, "invalid_token")


async def test_ws_conversation_id_query_nul_refused_with_envelope(
    server: Server, customer: Customer
) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    url = f"{server.ws}/v1/sts/ws?conversation_id={quote(NUL_ID)}"
    await expect_refusal(url, 404, "conversation_not_found", headers)


async def test_ws_config_agent_nul_error_frame_socket_stays_open(
    server: Server, customer: Customer
) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        await ws.send(json.dumps({"type": "config", "agent": customer.agent + "\x00"}))
        error = await receive(ws)
        assert (error["type"], error["error"]["code"]) == ("error", "validation_error"), error
        assert set(error["param_errors"]) == {"agent"}
        # Still open: a proper config now starts the conversation.
        assert (await configure(ws, customer.agent)).startswith("conv_")


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        ({"type": "set_external_id", "external_id": "crm\x00"}, "external_id"),
        ({"type": "set_external_id", "external_id": "crm\x1b[2J"}, "external_id"),
        ({"type": "generate_reply", "user_message": "hi\x00"}, "user_message"),
        ({"type": "generate_reply", "system_message": "\x00"}, "system_message"),
        ({"type": "say", "text": "hello\x00"}, "text"),
        ({"type": "update_system_prompt", "system_prompt": "p\x00"}, "system_prompt"),
    ],
    ids=["external-id-nul", "external-id-escape", "user-message-nul", "system-message-nul",
         "say-nul", "system-prompt-nul"],
)  # fmt: skip
async def test_ws_frame_nul_error_frame_socket_stays_open(
    server: Server, customer: Customer, frame: dict[str, str], field: str
) -> None:
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as ws:
        conversation_id = await configure(ws, customer.agent)
        await ws.send(json.dumps(frame))
        error = await receive(ws)
        assert (error["type"], error["error"]["code"]) == ("error", "validation_error"), error
        assert set(error["param_errors"]) == {field}
        await ws.send(json.dumps({"type": "set_external_id", "external_id": "crm-1"}))
        await ws.send(json.dumps({"type": "dance"}))
        assert (await receive(ws))["error"]["code"] == "unknown_message_type"
    shown = (await customer.api.get(f"/v1/conversations/{conversation_id}")).json()
    assert shown["conversation"]["external_id"] == "crm-1"
