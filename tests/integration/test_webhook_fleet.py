"""Two real `parley serve` processes on one PostgreSQL database deliver each attempt once
(API.md section 14: "in a fleet, each attempt is made by exactly one instance"): 200
events, written through both, counted at a real receiver on loopback, where the first
100 requests fail and are retried on a 1 s schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.databases import postgres_admin_url, postgres_database
from tests.faults.serve_process import ServeProcess
from tests.integration.test_two_instances import flush_redis, pair_redis_url
from tests.webhook_receiver import Reply, running_receiver

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.e2e,
    pytest.mark.xdist_group("redis-db-12"),  # each test empties logical database 12
]

EVENTS = 200
FAILING = 100
REDIS_DB = 12


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: these tests need PostgreSQL.")
    redis_url = pair_redis_url().rsplit("/", 1)[0] + f"/{REDIS_DB}"
    flush_redis(redis_url)
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        shared: dict[str, Any] = {
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_REDIS_URL": redis_url,
            "PARLEY_OUTBOUND_ALLOW_HTTP": "true",
            "PARLEY_OUTBOUND_ALLOW_PRIVATE_NETWORKS": "true",
            "PARLEY_WEBHOOK_RETRY_SCHEDULE": "1,1,1",
            # An attempt whose record fails (a statement or pool wait past its bound) is
            # made again once its lease runs out: at least once, by design, and then the
            # counts below differ. On a machine this test shares with three other workers,
            # waits of seconds happen; what is under test is who makes each attempt, so
            # the bounds are wide enough that the database never fails the record here.
            "PARLEY_DATABASE_STATEMENT_TIMEOUT_SECONDS": "60",
            "PARLEY_DATABASE_POOL_TIMEOUT_SECONDS": "60",
            "PARLEY_DATABASE_CONNECT_TIMEOUT_SECONDS": "30",
        }
        a = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="fleet-a", **shared)
        b = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="fleet-b", **shared)
        stack.callback(a.ensure_stopped)
        stack.callback(b.ensure_stopped)
        a.start()
        b.start()
        yield a, b


async def all_deliveries(client: httpx.AsyncClient, webhook_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor = None
    for _ in range(EVENTS):  # bounded: one page per event at most
        params: dict[str, Any] = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/v1/webhooks/{webhook_id}/deliveries", params=params)).json()
        found += page["deliveries"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    return found


async def test_two_instances_make_each_attempt_once(
    fleet: tuple[ServeProcess, ServeProcess],
) -> None:
    a, b = fleet
    assert a.first_key is not None
    headers = {"Authorization": f"Bearer {a.first_key}"}
    with running_receiver() as receiver:
        receiver.script(*[Reply.json({}, status=500)] * FAILING, Reply.json({}))
        async with (
            httpx.AsyncClient(base_url=a.http, headers=headers, timeout=30) as on_a,
            httpx.AsyncClient(base_url=b.http, headers=headers, timeout=30) as on_b,
        ):
            made = await on_a.post(
                "/v1/webhooks", json={"url": receiver.url(), "event_types": ["agent.created"]}
            )
            assert made.status_code == 201, made.text
            webhook_id = made.json()["webhook"]["id"]
            await asyncio.sleep(1)  # both instances see the webhook on their next poll

            async def create(n: int) -> None:
                client = (on_a, on_b)[n % 2]
                answer = await client.post(
                    "/v1/agents", json={"name": f"fleet-{n}-{secrets.token_hex(3)}"}
                )
                assert answer.status_code == 201, answer.text

            for start in range(0, EVENTS, 20):
                await asyncio.gather(*(create(n) for n in range(start, start + 20)))

            deliveries: list[dict[str, Any]] = []
            for _ in range(600):  # up to 60 s
                deliveries = await all_deliveries(on_b, webhook_id)
                if len(deliveries) == EVENTS and all(
                    d["status"] == "delivered" for d in deliveries
                ):
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.5)  # a duplicate attempt, if any were made, arrives by now
        received = Counter(request.headers["webhook-id"] for request in receiver.requests)
    assert len(deliveries) == EVENTS
    assert {d["status"] for d in deliveries} == {"delivered"}
    attempts = {d["id"]: d["attempts"] for d in deliveries}
    unrecorded = [
        line
        for server in fleet
        for line in server.output.read_text().splitlines()
        if "record webhook attempts" in line
    ]
    assert unrecorded == []  # a record that failed would explain the counts below
    assert sum(attempts.values()) == EVENTS + FAILING
    assert received == Counter(attempts)  # each recorded attempt reached the receiver once
