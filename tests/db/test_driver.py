"""`DriverStatements`: PostgreSQL's point reads and autocommitted statements on asyncpg
directly. They read what the engine reads (same columns, same conversions), each statement
commits on its own, failures are the same Parley errors, and a restart's broken
connections are replaced (db/driver.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import bindparam, select, text

from parley.db.database import Database
from parley.db.repos import session_tokens as token_repo
from parley.db.tables import OrganizationRow, SessionTokenRow
from parley.errors import Conflict, Unavailable

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("database_url", ["postgres"], indirect=True),
]

_ORGANIZATIONS = OrganizationRow.__table__
_BY_ID = select(_ORGANIZATIONS).where(_ORGANIZATIONS.c.id == bindparam("id"))
_BY_IDS = select(_ORGANIZATIONS.c.id).where(
    _ORGANIZATIONS.c.id.in_(bindparam("ids", expanding=True))
)


async def _add_organization(database: Database, org_id: str) -> None:
    async with database.transaction() as session:
        session.add(OrganizationRow(id=org_id, name=f"n-{org_id}", created_at=datetime.now(UTC)))


async def test_driver_point_read_reads_as_engine_does(database: Database) -> None:
    assert database.driver is not None
    await _add_organization(database, "org_drv_a")
    async with database.statement() as connection:
        expected = (await connection.execute(_BY_ID, {"id": "org_drv_a"})).one()
    async with database.point_read() as connection:
        assert connection is database.driver
        found = (await connection.execute(_BY_ID, {"id": "org_drv_a"})).one()
        missing = (await connection.execute(_BY_ID, {"id": "org_drv_none"})).first()

    assert tuple(found) == tuple(expected)
    assert found._mapping == expected._mapping
    assert found.created_at.tzinfo is UTC  # the Timestamp type's conversion, as the engine's
    assert missing is None


async def test_driver_json_columns_read_as_engine_reads_them(database: Database) -> None:
    await _add_organization(database, "org_drv_j")
    async with database.transaction() as session:
        session.add(
            SessionTokenRow(
                id="stk_drv_j",
                org_id="org_drv_j",
                secret_hash="hash-drv-j",
                conversation_ids=["c1", "c2"],
                expires_at=datetime.now(UTC),
                created_at=datetime.now(UTC),
            )
        )
    async with database.statement() as connection:
        expected = await token_repo.find_by_hash(connection, "hash-drv-j")
    async with database.point_read() as connection:
        found = await token_repo.find_by_hash(connection, "hash-drv-j")

    assert found == expected
    assert found is not None
    assert sorted(found.conversation_ids) == ["c1", "c2"]


async def test_driver_expanding_in_runs_through_engine(database: Database) -> None:
    await _add_organization(database, "org_drv_x")
    async with database.point_read() as connection:
        rows = (await connection.execute(_BY_IDS, {"ids": ["org_drv_x", "nope"]})).all()
    assert [row.id for row in rows] == ["org_drv_x"]


async def test_driver_autocommit_statement_commits_on_its_own(
    database: Database, database_url: str
) -> None:
    await _add_organization(database, "org_drv_c")
    async with database.autocommit() as writer:
        changed = await writer.execute(
            text("UPDATE organizations SET name = :name WHERE id = :id RETURNING name"),
            {"name": "renamed", "id": "org_drv_c"},
        )
        assert changed.scalar() == "renamed"
        other = Database.from_url(database_url)  # another connection sees it at once
        try:
            async with other.statement() as connection:
                name = (
                    await connection.execute(
                        text("SELECT name FROM organizations WHERE id = :id"), {"id": "org_drv_c"}
                    )
                ).scalar()
        finally:
            await other.dispose()
    assert name == "renamed"


async def test_driver_unique_violation_is_conflict(database: Database) -> None:
    await _add_organization(database, "org_drv_u")
    insert = text("INSERT INTO organizations (id, name, created_at) VALUES (:id, 'x', now())")
    with pytest.raises(Conflict):
        async with database.autocommit() as writer:
            await writer.execute(insert, {"id": "org_drv_u"})


async def test_driver_statement_timeout_is_503_next_statement_answers(database_url: str) -> None:
    bounded = Database.from_url(database_url, statement_timeout=0.2)
    try:
        with pytest.raises(Unavailable):
            async with bounded.point_read() as connection:
                await connection.execute(text("SELECT pg_sleep(:seconds)"), {"seconds": 2})
        async with bounded.point_read() as connection:
            assert (await connection.execute(text("SELECT 1 AS one"))).scalar() == 1
    finally:
        await bounded.dispose()


async def test_driver_connections_killed_replaced_next_statement_answers(
    database: Database,
) -> None:
    async with database.point_read() as connection:
        pid = (await connection.execute(text("SELECT pg_backend_pid() AS pid"))).scalar()
    async with database.statement() as connection:  # the server ends that backend
        await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    answers = []
    for _ in range(2):  # the first may meet the broken connection: 503, never a 500
        try:
            async with database.point_read() as connection:
                answers.append((await connection.execute(text("SELECT 1 AS one"))).scalar())
        except Unavailable:
            answers.append("unavailable")
    assert answers[-1] == 1


async def test_driver_statements_json_codec_round_trips(database: Database) -> None:
    async with database.point_read() as connection:
        value = (
            await connection.execute(text("SELECT CAST(:doc AS json) AS doc"), {"doc": '{"a": 1}'})
        ).scalar()
    assert value == json.loads('{"a": 1}')
