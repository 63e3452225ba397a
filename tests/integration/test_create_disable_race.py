"""Disable wins the race against `POST /v1/conversations` across instances (API.md section 4,
issue #22 item 2).

Two real `parley serve` processes share one PostgreSQL database. In each round, creates
sent to both instances race a disable sent to the second. A create that answers 201 must
have committed before the disable took the agent's row: its conversation's `created_at`
(stamped inside its transaction) is earlier than the agent's `disabled_at`. Without the row
lock a create reads the agent before the disable commits and stamps after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from parley.db.engine import create_engine
from tests.databases import postgres_admin_url, postgres_database
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.e2e]

ROUNDS = 10
CREATES_PER_ROUND = 20


@dataclass(frozen=True)
class Pair:
    a: ServeProcess
    b: ServeProcess
    key: str
    database_url: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: this test needs PostgreSQL.")
    cwd: Path = tmp_path_factory.mktemp("create-disable-race")
    with contextlib.ExitStack() as stack:
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        a = ServeProcess(cwd, PARLEY_DATABASE_URL=database_url, PARLEY_INSTANCE_ID="race-a")
        b = ServeProcess(cwd, PARLEY_DATABASE_URL=database_url, PARLEY_INSTANCE_ID="race-b")
        stack.callback(a.ensure_stopped)
        stack.callback(b.ensure_stopped)
        a.start()
        b.start()
        assert a.first_key is not None, "the first instance printed no API key"
        yield Pair(a, b, a.first_key, database_url)


async def late_creates(database_url: str, agent_name: str) -> list[str]:
    """The conversations of `agent_name` stamped after its disable."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT c.id FROM conversations c JOIN agents a ON a.id = c.agent_id "
                    "WHERE a.name = :name AND c.created_at > a.disabled_at"
                ),
                {"name": agent_name},
            )
            return [row[0] for row in rows]
    finally:
        await engine.dispose()


async def test_create_conversation_racing_disable_on_other_instance_never_lands_after(
    pair: Pair,
) -> None:
    headers = {"Authorization": f"Bearer {pair.key}"}
    late: list[str] = []
    statuses: list[int] = []
    async with (
        httpx.AsyncClient(base_url=pair.a.http, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=pair.b.http, headers=headers, timeout=30) as b,
    ):
        for _ in range(ROUNDS):
            name = f"race-{secrets.token_hex(4)}"
            made = await a.post("/v1/agents", json={"name": name, "welcome_message": None})
            assert made.status_code == 201, made.text

            async def create(index: int, name: str = name) -> httpx.Response:
                client = a if index % 2 else b
                return await client.post("/v1/conversations", json={"agent": name})

            half = CREATES_PER_ROUND // 2
            first = [asyncio.create_task(create(i)) for i in range(half)]
            disable = asyncio.create_task(
                b.post(f"/v1/agents/{made.json()['agent']['id']}/disable")
            )
            second = [asyncio.create_task(create(i)) for i in range(half, CREATES_PER_ROUND)]
            answers = await asyncio.gather(*first, *second)
            assert (await disable).status_code == 200
            for answer in answers:
                statuses.append(answer.status_code)
                if answer.status_code == 409:
                    assert answer.json()["error"]["code"] == "agent_disabled", answer.text
                else:
                    assert answer.status_code == 201, answer.text
            late += await late_creates(pair.database_url, name)
    assert late == [], (
        f"{len(late)} creates committed after the disable ({statuses.count(201)} 201s)"
    )
    assert 201 in statuses, "no create won: no race happened"
    assert 409 in statuses, "no create lost: no race happened"
