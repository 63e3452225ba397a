"""Issue #9 finding 3: PostgreSQL restarting under load answers 503 with `Retry-After`,
never 500, and the first requests after it is back succeed (broken connections are dropped
from the pool)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.faults.conftest import (
    Load,
    assert_ok_or_unavailable,
    fault_settings,
    running_app,
)
from tests.faults.pg_cluster import PostgresCluster

pytestmark = pytest.mark.anyio


async def _recovered(client: httpx.AsyncClient) -> None:
    """Right after a restart every request succeeds, the first one included."""
    for n in range(10):
        answer = await client.get("/v1/agents")
        assert answer.status_code == 200, (n, answer.text)
    created = await client.post("/v1/projects", json={"name": "after-restart"})
    assert created.status_code == 201, created.text
    assert (await client.get("/health")).status_code == 200


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_postgres_restart_under_load_answers_503_never_500(
    pg_cluster: PostgresCluster, mode: str
) -> None:
    async with running_app(fault_settings(pg_cluster.url)) as running:
        client = running.client
        load = Load()

        async def send(n: int) -> httpx.Response:
            if n % 3 == 0:
                return await client.post("/v1/projects", json={"name": f"p-{id(load)}-{n}"})
            return await client.get("/v1/agents" if n % 3 == 1 else "/health")

        traffic = asyncio.create_task(load.run(send))
        try:
            for _ in range(2):
                await asyncio.sleep(0.4)
                await asyncio.to_thread(pg_cluster.stop, mode)
                await asyncio.sleep(0.6)
                await asyncio.to_thread(pg_cluster.start)
            await asyncio.sleep(0.4)
        finally:
            load.stop()
            await asyncio.wait_for(traffic, 30)

        assert 503 in load.statuses()  # the fault was seen
        assert_ok_or_unavailable(load.answers, ok={200, 201, 409})
        await _recovered(client)


async def test_postgres_restart_while_idle_first_request_succeeds(
    pg_cluster: PostgresCluster,
) -> None:
    async with running_app(fault_settings(pg_cluster.url)) as running:
        # Fill the pool with connections, then restart the server under them.
        answers = await asyncio.gather(*(running.client.get("/v1/agents") for _ in range(8)))
        assert {a.status_code for a in answers} == {200}
        await asyncio.to_thread(pg_cluster.stop, "immediate")
        await asyncio.to_thread(pg_cluster.start)
        await _recovered(running.client)
