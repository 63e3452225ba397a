"""The read model across a fleet (services/read_model.py, issue #23): two real `parley serve`
processes on one PostgreSQL database and one Redis. A change made on one instance reaches
the other's copies through the change feed; a change whose announcement is lost reaches
them within the bound (the generation check); a revoked key stops at once on both.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from parley.app import create_app
from parley.config import Settings
from parley.records import Actor
from parley.services import Context, agents, orgs
from parley.services.authn import authenticate
from parley.services.read_model import BOUND_SECONDS
from tests.databases import TEST_SECRET_KEY, postgres_admin_url, postgres_database
from tests.faults.redis_server import RedisServer
from tests.faults.serve_process import ServeProcess

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.e2e]

ACTOR = Actor(kind="api_key", id="key_test")


@dataclass(frozen=True)
class Fleet:
    a: ServeProcess
    b: ServeProcess
    key: str
    database_url: str
    redis_url: str


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if postgres_admin_url() is None:
        pytest.fail("PARLEY_TEST_DATABASE_URL is not set: these tests need PostgreSQL.")
    # A Redis of the fleet's own: a test cuts its subscriptions (never the shared server's).
    server = RedisServer()
    cwd: Path = tmp_path_factory.mktemp("read-model-fleet")
    with contextlib.ExitStack() as stack:
        stack.callback(server.destroy)
        server.start()
        redis_url = server.url
        database_url = stack.enter_context(contextlib.contextmanager(postgres_database)())
        shared = {"PARLEY_DATABASE_URL": database_url, "PARLEY_REDIS_URL": redis_url}
        a = ServeProcess(cwd, PARLEY_INSTANCE_ID="read-model-a", **shared)
        b = ServeProcess(cwd, PARLEY_INSTANCE_ID="read-model-b", **shared)
        stack.callback(a.ensure_stopped)
        stack.callback(b.ensure_stopped)
        a.start()
        b.start()
        assert a.first_key is not None, "the first instance printed no API key"
        yield Fleet(a, b, a.first_key, database_url, redis_url)


@pytest.fixture
async def silent(fleet: Fleet) -> AsyncIterator[Context]:
    """A process on the fleet's database that announces nothing (no Redis): its changes
    reach the instances only through the generation check."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=fleet.database_url,
        redis_url=None,
        secret_key=TEST_SECRET_KEY,
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        context: Context = application.state.context
        yield context


@pytest.fixture
async def key(silent: Context) -> str:
    """The first API key of a fresh organization: no instance holds copies of it yet, so a
    copy made in a test was last confirmed when the test made it."""
    return (await orgs.create_org(silent, name=f"org-{secrets.token_hex(4)}")).api_key.secret


def api(serve: ServeProcess, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=serve.http, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


async def make_agent(fleet: Fleet, key: str) -> str:
    name = f"agent-{secrets.token_hex(4)}"
    async with api(fleet.a, key) as client:
        made = await client.post("/v1/agents", json={"name": name, "welcome_message": None})
    assert made.status_code == 201, made.text
    return name


async def agent_on(serve: ServeProcess, key: str, name: str) -> dict[str, Any]:
    async with api(serve, key) as client:
        answer = await client.get(f"/v1/agents/{name}")
    assert answer.status_code == 200, answer.text
    agent: dict[str, Any] = answer.json()["agent"]
    return agent


async def seconds_until_disabled(serve: ServeProcess, key: str, name: str, limit: float) -> float:
    """Poll `serve` until it shows the agent disabled; return how long that took."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if (await agent_on(serve, key, name))["is_disabled"]:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    pytest.fail(f"{serve.http} still served the agent enabled after {limit} s")


async def disable_silently(silent: Context, key: str, name: str) -> None:
    org_id = (await authenticate(silent, key)).org_id
    await agents.disable_agent(silent, org_id=org_id, ref=name, project=None, actor=ACTOR)


async def test_read_model_fleet_change_announced_reaches_other_instance(
    fleet: Fleet, key: str
) -> None:
    """b's copy is dropped by a's announcement, before b would check the generation."""
    name = await make_agent(fleet, key)
    copied_at = time.monotonic()
    assert (await agent_on(fleet.b, key, name))["is_disabled"] is False  # b keeps a copy

    async with api(fleet.a, key) as client:
        assert (await client.post(f"/v1/agents/{name}/disable")).status_code == 200
    await seconds_until_disabled(fleet.b, key, name, limit=BOUND_SECONDS)

    assert time.monotonic() - copied_at < BOUND_SECONDS, "too slow to tell the feed did it"


async def test_read_model_fleet_lost_announcement_bounded(
    fleet: Fleet, silent: Context, key: str
) -> None:
    """A change nobody announces (a publish suppressed) is served stale for at most the
    bound on every instance: the generation check drops the old copies."""
    name = await make_agent(fleet, key)
    for serve in (fleet.a, fleet.b):
        assert (await agent_on(serve, key, name))["is_disabled"] is False

    await disable_silently(silent, key, name)
    committed = time.monotonic()
    assert (await agent_on(fleet.b, key, name))["is_disabled"] is False  # stale, as allowed

    for serve in (fleet.a, fleet.b):
        await seconds_until_disabled(serve, key, name, limit=BOUND_SECONDS + 1.0)
    assert time.monotonic() - committed <= BOUND_SECONDS + 1.0


async def test_read_model_fleet_resubscribed_instance_drops_its_copies(
    fleet: Fleet, silent: Context, key: str
) -> None:
    """An instance whose subscription was cut may have missed announcements: it drops every
    copy when it subscribes again, without waiting for the bound."""
    name = await make_agent(fleet, key)
    copied_at = time.monotonic()
    assert (await agent_on(fleet.b, key, name))["is_disabled"] is False
    await disable_silently(silent, key, name)  # announced to nobody
    with redis.Redis.from_url(fleet.redis_url) as client:
        client.client_kill_filter(_type="pubsub")

    await seconds_until_disabled(fleet.b, key, name, limit=BOUND_SECONDS)

    assert time.monotonic() - copied_at < BOUND_SECONDS, "too slow to tell resubscribing did it"


async def test_read_model_fleet_revoked_key_refused_at_once_everywhere(
    fleet: Fleet, key: str
) -> None:
    async with api(fleet.a, key) as client:
        made = await client.post("/v1/api_keys", json={"name": f"k-{secrets.token_hex(3)}"})
    assert made.status_code == 201, made.text
    key_id, secret = made.json()["id"], made.json()["secret"]
    name = await make_agent(fleet, key)
    for serve in (fleet.a, fleet.b):
        await agent_on(serve, secret, name)

    async with api(fleet.a, key) as client:
        assert (await client.delete(f"/v1/api_keys/{key_id}")).status_code == 200

    for serve in (fleet.a, fleet.b):
        async with api(serve, secret) as client:
            assert (await client.get(f"/v1/agents/{name}")).status_code == 401
