"""The conversation socket under the workspace's rules (API.md section 17), over real
uvicorn: a `config` past a cap on active conversations gets an `error` frame and a 1008
close, and an ended conversation frees its place; an IP allowlist refuses the handshake of
an API key from another address (403 `ip_not_allowed`, answered as HTTP) but never a JWT's.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from fastapi import FastAPI
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from parley.records import OPERATOR, WorkspacePatch
from parley.services import Context, workspace
from tests.e2e.conftest import Customer, Server
from tests.faults.ws_client import configure, receive, until_closed

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def active_in_main(customer: Customer) -> int:
    response = await customer.api.get("/v1/projects/main")
    assert response.status_code == 200, response.text
    count: int = response.json()["project"]["active_conversations"]
    return count


async def until_active(customer: Customer, count: int, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while (found := await active_in_main(customer)) != count:
        assert time.monotonic() < deadline, f"{found} active, not {count}"
        await asyncio.sleep(0.05)


async def test_socket_config_past_cap_error_frame_then_1008_and_ended_frees_place(
    server: Server, customer: Customer
) -> None:
    capped = await customer.api.patch("/v1/projects/main", json={"max_active_conversations": 1})
    assert capped.status_code == 200, capped.text
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as first:
        await configure(first, customer.agent)
        assert await active_in_main(customer) == 1
        async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as second:
            await second.send(json.dumps({"type": "config", "agent": customer.agent}))
            refused = await receive(second)
            assert refused["type"] == "error", refused
            assert refused["error"]["code"] == "too_many_active_conversations"
            assert await until_closed(second) == (1008, "too_many_active_conversations")
        assert await active_in_main(customer) == 1
    await until_active(customer, 0)  # the first ended as its socket closed
    async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers) as third:
        await configure(third, customer.agent)


async def test_socket_ip_allowlist_refuses_api_key_handshake_403_but_never_a_jwt(
    app: FastAPI, server: Server, customer: Customer
) -> None:
    ctx: Context = app.state.context
    org_id = (await customer.api.get("/v1/workspace")).json()["id"]
    await workspace.update_workspace(
        ctx,
        org_id=org_id,
        patch=WorkspacePatch(ip_allowlist=("203.0.113.0/24",)),
        actor=OPERATOR,
        client="203.0.113.5",
    )
    headers = {"Authorization": f"Bearer {customer.api_key}"}
    with pytest.raises(InvalidStatus) as raised:
        async with connect(f"{server.ws}/v1/sts/ws", additional_headers=headers):
            pass
    body: dict[str, Any] = json.loads(raised.value.response.body or b"{}")
    assert raised.value.response.status_code == 403
    assert body["error"]["code"] == "ip_not_allowed"
    token = customer.jwt("allowlist-jwt")
    async with connect(f"{server.ws}/v1/sts/ws?jwt={token}") as ws:
        assert await configure(ws, customer.agent) == "allowlist-jwt"
