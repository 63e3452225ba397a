"""Disable wins every race: no update lands after a disable has answered (API.md section 4).

Many PATCH requests run concurrently with one disable, over the real database (SQLite and
PostgreSQL). The state read right after the disable answered must be the final state, and
every PATCH either landed before it (200) or was refused (409 `agent_disabled`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from tests.types import MakeAgent, Tenant

pytestmark = pytest.mark.anyio

ROUNDS = 5
PATCHES_PER_ROUND = 24


async def test_disable_wins_race_against_concurrent_updates(
    tenant: Tenant, make_agent: MakeAgent
) -> None:
    for round_number in range(ROUNDS):
        agent = await make_agent(tenant)
        path = f"/v1/agents/{agent['id']}"
        disabled = asyncio.Event()
        state_after_disable: dict[str, Any] = {}

        async def patch(
            index: int, path: str = path, round_number: int = round_number
        ) -> httpx.Response:
            if index >= PATCHES_PER_ROUND // 2:
                await asyncio.sleep(0)
            body = {"system_prompt": f"round {round_number} patch {index}"}
            return await tenant.client.patch(path, json=body)

        async def disable(
            path: str = path,
            disabled: asyncio.Event = disabled,
            state: dict[str, Any] = state_after_disable,
        ) -> None:
            response = await tenant.client.post(f"{path}/disable")
            assert response.json() == {"success": True}
            state.update((await tenant.client.get(path)).json()["agent"])
            disabled.set()

        tasks = [asyncio.create_task(patch(i)) for i in range(PATCHES_PER_ROUND // 2)]
        tasks.append(asyncio.create_task(disable()))
        tasks += [
            asyncio.create_task(patch(i)) for i in range(PATCHES_PER_ROUND // 2, PATCHES_PER_ROUND)
        ]
        results = await asyncio.gather(*tasks)
        late = [await patch(PATCHES_PER_ROUND + i) for i in range(3)]

        final = (await tenant.client.get(path)).json()["agent"]
        assert final == state_after_disable, "an update landed after the disable answered"
        assert final["is_disabled"] is True
        statuses = {r.status_code for r in results if isinstance(r, httpx.Response)}
        assert statuses <= {200, 409}
        assert all(r.status_code == 409 for r in late)
        assert all(r.json()["error"]["code"] == "agent_disabled" for r in late)
        landed = {
            r.json()["agent"]["system_prompt"]
            for r in results
            if isinstance(r, httpx.Response) and r.status_code == 200
        }
        if landed:
            assert final["system_prompt"] in landed
        else:
            assert final["system_prompt"] == agent["system_prompt"]
