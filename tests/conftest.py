"""Shared fixtures: settings factory, databases, the app in its lifespan, tenants."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from phonic import AsyncPhonic
from phonic.environment import PhonicEnvironment
from sqlalchemy import event

from parley.app import create_app
from parley.config import Settings
from parley.services import Context
from tests import databases
from tests.factories import make_org, unique_name
from tests.types import MakeAgent, MakeTenant, Tenant

TEST_SECRET_KEY = databases.TEST_SECRET_KEY

pytest_plugins = ["anyio", "tests.xdist_guard"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`), a module's tests that share one of its
    module-scoped fixtures (a server, a fleet) run on one worker, so it is built once.

    Every other test is handed to whichever worker is free. A module can also name a group
    itself (`pytestmark = pytest.mark.xdist_group("…")`) for state no fixture shows, such as a
    Redis logical database it empties.
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _shares_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definitions[-1].scope == "module" for definitions in info.name2fixturedefs.values())


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test leaves os.environ as it found it: code under test may set variables (an
    in-process `parley serve` sets PARLEY_PUBLIC_URL for its workers), and a worker's next
    test must not read them."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return databases.make_sqlite_template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    yield from databases.postgres_database()


@pytest.fixture(params=databases.database_kinds())
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> Iterator[str]:
    """A migrated, empty database: a SQLite copy, or the run's PostgreSQL emptied after."""
    if request.param == "sqlite":
        yield databases.sqlite_copy(sqlite_template, tmp_path)
        return
    url: str = request.getfixturevalue("postgres_url")
    try:
        yield url
    finally:
        databases.run_in_own_loop(databases.empty_tables(url))


@pytest.fixture
def settings_factory(database_url: str) -> Any:
    """Build Settings from explicit values only (never the developer's environment)."""

    def build(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"database_url": database_url, "redis_url": None}
        values["secret_key"] = TEST_SECRET_KEY
        values.update(overrides)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]

    return build


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory()
    return built


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The application with its lifespan entered (ASGITransport runs no lifespan)."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
def ctx(app: FastAPI) -> Context:
    context: Context = app.state.context
    return context


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


@pytest.fixture
async def make_tenant(ctx: Context, app: FastAPI) -> AsyncIterator[MakeTenant]:
    """Create organizations, each with a client that sends its first API key."""
    clients: list[httpx.AsyncClient] = []

    async def make(name: str | None = None) -> Tenant:
        created = await make_org(ctx, name)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        http = httpx.AsyncClient(
            transport=transport,
            base_url="http://testserver",
            headers={"Authorization": f"Bearer {created.api_key.secret}"},
        )
        clients.append(http)
        return Tenant(org=created.org, api_key=created.api_key.secret, client=http)

    try:
        yield make
    finally:
        for http in clients:
            await http.aclose()


@pytest.fixture
async def tenant(make_tenant: MakeTenant) -> Tenant:
    return await make_tenant()


@pytest.fixture
async def sdk(app: FastAPI, tenant: Tenant) -> AsyncIterator[AsyncPhonic]:
    """The official `phonic` SDK's async client, unchanged, on the app in-process (httpx's
    ASGI transport), with the tenant's API key (API.md section 17)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        environment = PhonicEnvironment(base="http://testserver/v1", production="ws://testserver")
        yield AsyncPhonic(api_key=tenant.api_key, environment=environment, httpx_client=http)


@pytest.fixture
async def other_tenant(make_tenant: MakeTenant) -> Tenant:
    return await make_tenant()


@pytest.fixture
def make_agent() -> MakeAgent:
    async def make(tenant: Tenant, **fields: Any) -> dict[str, Any]:
        body = {"name": unique_name("agent"), **fields}
        project = body.pop("project_query", None)
        params = {"project": project} if project else None
        response = await tenant.client.post("/v1/agents", json=body, params=params)
        assert response.status_code == 201, response.text
        agent: dict[str, Any] = response.json()["agent"]
        return agent

    return make


@pytest.fixture
async def timer_stopped(app: FastAPI) -> None:
    """Stop the instance's timer (the lease, revocations waiting, spent `jti` records) and its
    webhook worker (a poll of the outbox every 0.5 s), for a test that counts the database's
    statements or reads: theirs would otherwise land among them at a moment the machine's
    load decides."""
    await app.state.timer.stop()
    await app.state.webhook_worker.stop()


@pytest.fixture
def statements(app: FastAPI, timer_stopped: None) -> Iterator[list[str]]:
    """Every SQL statement the app's database runs, on either engine, for the test alone
    (the instance's timer stopped first)."""
    seen: list[str] = []
    db = app.state.context.db

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    engines = {db.engine.sync_engine, db.read_engine.sync_engine}
    if db.direct_reads is not None:  # SQLite's one-statement reads
        engines.add(db.direct_reads.engine)
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    if db.inline_reads is not None:  # SQLite's reads in the event loop's thread
        db.inline_reads.observe(seen.append)
    if db.driver is not None:  # PostgreSQL's statements on asyncpg directly
        db.driver.observe(seen.append)
    yield seen
    for engine in engines:
        event.remove(engine, "before_cursor_execute", record)
    if db.inline_reads is not None:
        db.inline_reads.observe(None)
    if db.driver is not None:
        db.driver.observe(None)
