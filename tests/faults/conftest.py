"""Fault fixtures: a PostgreSQL cluster of the test's own and the app running against it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from parley.app import create_app
from parley.config import Settings
from parley.db.engine import create_engine
from parley.db.migrate import upgrade
from parley.errors import Unavailable
from parley.services.orgs import NewOrganization
from tests import databases
from tests.databases import run_in_own_loop
from tests.factories import make_org
from tests.faults.pg_cluster import PostgresCluster

# Tight bounds keep every fault test well under a minute.
BOUNDS: dict[str, Any] = {
    "database_connect_timeout_seconds": 1.0,
    "database_statement_timeout_seconds": 1.5,
    "database_pool_timeout_seconds": 1.0,
}


@pytest.fixture
def pg_cluster() -> Iterator[PostgresCluster]:
    """A running, migrated cluster; destroyed (stopped, files removed) afterwards."""
    cluster = PostgresCluster()
    try:
        cluster.start()
        run_in_own_loop(_migrate(cluster.url))
        yield cluster
    finally:
        cluster.destroy()


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


def fault_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"database_url": database_url, "redis_url": None, **BOUNDS}
    values["secret_key"] = databases.TEST_SECRET_KEY  # never a key file in the working directory
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Running:
    """The app in its lifespan and a client holding a fresh organization's API key."""

    app: FastAPI
    client: httpx.AsyncClient


async def _first_org(app: FastAPI) -> NewOrganization:
    """The test's organization. A fresh cluster's first transaction can outlast the tight
    bounds of BOUNDS on a loaded machine (CI once timed out here, before any fault): the
    set-up tries three times; what the tests check runs after it, with the same bounds."""
    for _ in range(2):
        try:
            return await make_org(app.state.context)
        except Unavailable:
            await asyncio.sleep(0.5)
    return await make_org(app.state.context)


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[Running]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        created = await _first_org(app)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://faults",
            headers={"Authorization": f"Bearer {created.api_key.secret}"},
            timeout=30,
        ) as client:
            yield Running(app, client)


@dataclass
class Load:
    """Concurrent requests sent until stopped; every answer is recorded."""

    answers: list[httpx.Response] = field(default_factory=list)
    slowest: float = 0.0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(
        self, send: Callable[[int], Awaitable[httpx.Response]], *, workers: int = 6
    ) -> None:
        async def worker() -> None:
            n = 0
            # Bounded: at most 2,000 requests per worker, whatever happens.
            while not self._stop.is_set() and n < 2_000:
                started = time.monotonic()
                answer = await send(n)
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.answers.append(answer)
                n += 1
                await asyncio.sleep(0.01)

        await asyncio.gather(*(worker() for _ in range(workers)))

    def stop(self) -> None:
        self._stop.set()

    def statuses(self) -> set[int]:
        return {answer.status_code for answer in self.answers}


def assert_unavailable(answer: httpx.Response) -> None:
    """A 503 with the envelope, `service_unavailable` and `Retry-After`."""
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "service_unavailable", answer.text
    assert int(answer.headers["retry-after"]) >= 1


def assert_ok_or_unavailable(answers: list[httpx.Response], ok: set[int]) -> None:
    """Every answer is a success of `ok` or a proper 503: never a 500, never anything else."""
    for answer in answers:
        if answer.status_code == 503:
            assert_unavailable(answer)
        else:
            assert answer.status_code in ok, (answer.status_code, answer.text)
