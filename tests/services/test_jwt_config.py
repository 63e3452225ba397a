"""A JWKS refresh and its `jwt.refresh` audit event are one transaction (services/audit.py
rule 1): both rows appear together, and an audit insert that fails rolls the refresh back,
keeping the last good keys. On SQLite and PostgreSQL, against a JWKS server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy import text

from parley.app import create_app
from parley.db.engine import create_engine
from parley.errors import Conflict
from parley.jwt import JwksFetchError, generate_key_pair
from parley.records import Actor
from parley.services import Context, audit, jwt_config
from tests.factories import make_org
from tests.jwks_server import JwksServer, running_jwks_server

pytestmark = pytest.mark.anyio

ACTOR = Actor(kind="api_key", id="key_test", client="127.0.0.1", request_id="req-1")
ISSUER = "https://auth.example.com"

REFUSE_AUDIT = {
    "sqlite": [
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events "
        "BEGIN SELECT RAISE(ABORT, 'audit refused'); END",
    ],
    "postgresql": [
        "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'audit refused' USING ERRCODE = 'check_violation'; END $$",
        "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events "
        "FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
    ],
}
ALLOW_AUDIT = {
    "sqlite": ["DROP TRIGGER refuse_audit"],
    "postgresql": [
        "DROP TRIGGER refuse_audit ON audit_events",
        "DROP FUNCTION refuse_audit()",
    ],
}


@pytest.fixture
def jwks() -> Iterator[JwksServer]:
    with running_jwks_server() as server:
        yield server


@pytest.fixture
async def app(settings_factory: Any) -> AsyncIterator[FastAPI]:
    settings = settings_factory(jwks_allow_http=True, jwks_allow_private_networks=True)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


async def run_sql(database_url: str, statements: list[str]) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            for statement in statements:
                await connection.execute(text(statement))
    finally:
        await engine.dispose()


@asynccontextmanager
async def audit_inserts_refused(ctx: Context, database_url: str) -> AsyncIterator[None]:
    """While inside, the database refuses every new audit event (a trigger)."""
    await run_sql(database_url, REFUSE_AUDIT[ctx.db.dialect])
    try:
        yield
    finally:
        await run_sql(database_url, ALLOW_AUDIT[ctx.db.dialect])


async def registered_org(ctx: Context, jwks: JwksServer) -> str:
    """An organization whose JWKS URL serves key `k1`, registered and fetched once."""
    jwks.publish(generate_key_pair("ES256", kid="k1").jwks["keys"][0])
    org_id = (await make_org(ctx)).org.id
    config = jwt_config.JwtConfigInput(
        issuers=(ISSUER,), audience=None, jwks_url=jwks.url, public_keys=None, require_jti=False
    )
    await jwt_config.put_jwt_config(ctx, org_id=org_id, config=config, actor=ACTOR)
    return org_id


async def refresh_events(ctx: Context, org_id: str) -> list[dict[str, Any]]:
    page = await audit.list_events(
        ctx, org_id=org_id, action="jwt.refresh", target=None, cursor=None, limit=10
    )
    return [dict(event.details) for event in page.items]


async def test_refresh_jwks_and_its_event_commit_together(ctx: Context, jwks: JwksServer) -> None:
    org_id = await registered_org(ctx, jwks)
    jwks.publish(generate_key_pair("EdDSA", kid="k2").jwks["keys"][0])

    view = await jwt_config.refresh_jwks(ctx, org_id=org_id, actor=ACTOR)

    assert [key.kid for key in view.keys] == ["k2"]
    assert await refresh_events(ctx, org_id) == [{"ok": True, "kids": ["k2"]}]
    [report] = await audit.verify_chains(ctx, org_id=org_id)
    assert report.ok


async def test_refresh_jwks_failure_and_its_event_commit_together(
    ctx: Context, jwks: JwksServer
) -> None:
    org_id = await registered_org(ctx, jwks)
    jwks.down = True

    with pytest.raises(JwksFetchError):
        await jwt_config.refresh_jwks(ctx, org_id=org_id, actor=ACTOR)

    shown = await jwt_config.get_jwt_config(ctx, org_id=org_id)
    [event] = await refresh_events(ctx, org_id)
    assert [key.kid for key in shown.keys] == ["k1"]  # the last good keys stay in force
    assert shown.jwks_error == event["error"]
    assert event["ok"] is False
    assert "503" in event["error"]


async def test_refresh_jwks_audit_insert_failing_rolls_back_new_keys(
    ctx: Context, database_url: str, jwks: JwksServer
) -> None:
    org_id = await registered_org(ctx, jwks)
    before = await jwt_config.get_jwt_config(ctx, org_id=org_id)
    jwks.publish(generate_key_pair("EdDSA", kid="k2").jwks["keys"][0])

    async with audit_inserts_refused(ctx, database_url):
        with pytest.raises(Conflict):
            await jwt_config.refresh_jwks(ctx, org_id=org_id, actor=ACTOR)

    after = await jwt_config.get_jwt_config(ctx, org_id=org_id)
    ctx.jwt.key_cache.invalidate(org_id)  # what the database holds, not this instance's copy
    stored = await jwt_config.get_jwt_config(ctx, org_id=org_id)
    assert [key.kid for key in after.keys] == ["k1"]
    assert [key.kid for key in stored.keys] == ["k1"]
    assert stored.jwks_fetched_at == before.jwks_fetched_at
    assert await refresh_events(ctx, org_id) == []


async def test_refresh_jwks_audit_insert_failing_rolls_back_fetch_error(
    ctx: Context, database_url: str, jwks: JwksServer
) -> None:
    org_id = await registered_org(ctx, jwks)
    jwks.down = True

    async with audit_inserts_refused(ctx, database_url):
        with pytest.raises(Conflict):
            await jwt_config.refresh_jwks(ctx, org_id=org_id, actor=ACTOR)

    ctx.jwt.key_cache.invalidate(org_id)
    stored = await jwt_config.get_jwt_config(ctx, org_id=org_id)
    assert stored.jwks_error is None
    assert [key.kid for key in stored.keys] == ["k1"]
    assert await refresh_events(ctx, org_id) == []
