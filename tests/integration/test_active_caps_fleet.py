"""The cap on active conversations is exact across a fleet (API.md section 17, issue #41):
two real `parley serve` processes on one PostgreSQL database and one Redis, 100
conversation starts at once, 50 on each, against a workspace cap of 10. Exactly 10 go live;
the other 90 get the `error` frame and 1008. Then one instance is killed (-9): its
conversations stop counting once their leases lapse (PARLEY_CONVERSATION_LEASE_SECONDS=8),
and exactly as many new ones start on the survivor, no more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.databases import postgres_admin_url, postgres_database
from tests.faults.serve_process import ServeProcess
from tests.faults.ws_client import receive
from tests.integration.test_two_instances import flush_redis

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.e2e]

REDIS_DB = 11
"""A logical database of this fleet's own, flushed at the start."""
CAP = 10
STARTS = 100
LEASE_SECONDS = 8.0
"""Short, so that the killed instance's leases lapse soon; long enough that a loaded
machine's instance renews its own in time (a lapsed one is ended as an orphan)."""
ORPHANS_LINE = "whose instance is gone"


def fleet_redis_url() -> str:
    base = os.environ.get("PARLEY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/15"
    return urlsplit(base)._replace(path=f"/{REDIS_DB}").geturl()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: this test needs PostgreSQL.")
    redis_url = fleet_redis_url()
    flush_redis(redis_url)
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        shared = {
            "PARLEY_DATABASE_URL": database_url,
            "PARLEY_REDIS_URL": redis_url,
            "PARLEY_CONVERSATION_LEASE_SECONDS": str(LEASE_SECONDS),
            # 50 starts at once on one instance queue for its pool and their agent's row
            # lock on a loaded machine, rather than fail: every start gets its answer.
            "PARLEY_DATABASE_POOL_TIMEOUT_SECONDS": "60",
            "PARLEY_DATABASE_STATEMENT_TIMEOUT_SECONDS": "60",
        }
        a = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="caps-a", **shared)
        b = ServeProcess(tmp_path, PARLEY_INSTANCE_ID="caps-b", **shared)
        stack.callback(a.ensure_stopped)
        stack.callback(b.ensure_stopped)
        a.start()
        b.start()
        yield a, b


@contextlib.asynccontextmanager
async def sockets() -> AsyncIterator[list[ClientConnection]]:
    """Keep the sockets a test opens; close them all at the end."""
    opened: list[ClientConnection] = []
    try:
        yield opened
    finally:
        await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)


async def start(serve: ServeProcess, key: str, agent: str, opened: list[ClientConnection]) -> str:
    """Open a socket and send `config`: `live` (kept open), or the refusal's code."""
    ws = await connect(
        f"{serve.ws}/v1/sts/ws",
        additional_headers={"Authorization": f"Bearer {key}"},
        open_timeout=60,
    )
    opened.append(ws)
    await ws.send(json.dumps({"type": "config", "agent": agent}))
    first = await receive(ws, within=60)
    if first["type"] == "conversation_created":
        LIVE_SOCKETS[ws] = serve
        return "live"
    assert first["type"] == "error", first
    code: str = first["error"]["code"]
    return code


LIVE_SOCKETS: dict[ClientConnection, ServeProcess] = {}
"""The sockets whose conversation went live, and the instance that holds each."""


async def move_one(
    source: ServeProcess, target: ServeProcess, key: str, opened: list[ClientConnection]
) -> None:
    """End one of `source`'s live conversations and start one on `target` instead."""
    ws = next(ws for ws, serve in LIVE_SOCKETS.items() if serve is source)
    del LIVE_SOCKETS[ws]
    await ws.close()
    for _ in range(300):
        if await active(target, key) < CAP:
            break
        await asyncio.sleep(0.1)
    assert await start(target, key, "capped", opened) == "live"


async def active(serve: ServeProcess, key: str) -> int:
    async with httpx.AsyncClient(base_url=serve.http, timeout=30) as client:
        answer = await client.get("/v1/workspace", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    count: int = answer.json()["active_conversations"]
    return count


async def conversation_statuses(serve: ServeProcess, key: str) -> list[str]:
    async with httpx.AsyncClient(base_url=serve.http, timeout=30) as client:
        answer = await client.get(
            "/v1/conversations", headers={"Authorization": f"Bearer {key}"}, params={"limit": 100}
        )
    assert answer.status_code == 200, answer.text
    return [c["status"] for c in answer.json()["conversations"]]


async def test_active_cap_exact_across_two_instances_and_killed_instance_lease_lapses(
    fleet: tuple[ServeProcess, ServeProcess],
) -> None:
    a, b = fleet
    assert a.first_key is not None
    key = a.first_key
    async with httpx.AsyncClient(
        base_url=a.http, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        made = await client.post("/v1/agents", json={"name": "capped", "welcome_message": None})
        assert made.status_code == 201, made.text
        capped = await client.patch("/v1/workspace", json={"max_active_conversations": CAP})
        assert capped.status_code == 200, capped.text
    async with sockets() as opened_a, sockets() as opened_b:
        outcomes = await asyncio.gather(
            *(
                start(a, key, "capped", opened_a)
                if i % 2 == 0
                else start(b, key, "capped", opened_b)
                for i in range(STARTS)
            )
        )
        assert outcomes.count("live") == CAP, outcomes
        assert outcomes.count("too_many_active_conversations") == STARTS - CAP, outcomes
        assert await active(a, key) == CAP
        assert await active(b, key) == CAP
        statuses = await conversation_statuses(b, key)
        assert statuses.count("live") == CAP, statuses  # none went live, then ended
        assert not any(ORPHANS_LINE in s.output.read_text() for s in (a, b))
        on_a = sum(o == "live" for i, o in enumerate(outcomes) if i % 2 == 0)
        # Which instance won which start is the machine's race: make each hold at least one,
        # so that the kill below has leases to lapse and the survivor some of its own.
        if on_a == 0:
            await move_one(b, a, key, opened_a)
            on_a = 1
        elif on_a == CAP:
            await move_one(a, b, key, opened_b)
            on_a = CAP - 1
        assert await active(b, key) == CAP

        a.kill()
        killed_at = time.monotonic()
        while (count := await active(b, key)) != CAP - on_a:
            # The killed instance's leases count until they lapse, each at the end of its
            # own last renewal (a loaded instance renews them one by one, so they may lapse
            # a moment apart): the count only falls towards B's own, and not before a lease
            # could have lapsed.
            assert CAP - on_a < count <= CAP, count
            if count < CAP:
                assert time.monotonic() - killed_at >= LEASE_SECONDS * 0.5, count
            assert time.monotonic() - killed_at < LEASE_SECONDS + 15, count
            await asyncio.sleep(0.1)
        assert time.monotonic() - killed_at >= LEASE_SECONDS * 0.5  # not before a lapse
        again = await asyncio.gather(*(start(b, key, "capped", opened_b) for _ in range(on_a + 1)))
        assert again.count("live") == on_a, again
        assert again.count("too_many_active_conversations") == 1, again
        assert await active(b, key) == CAP
