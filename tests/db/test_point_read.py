"""`Database.point_read()`: a look-up by key. On SQLite it runs in the event loop's own
thread, with no thread hop, and never waits there: a busy database sends it to a reading
thread instead. On PostgreSQL it is `statement()`."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.exc import OperationalError

from parley.db.database import Database
from parley.db.direct import InlineReads
from parley.db.repos import conversations as conversation_repo
from parley.db.tables import OrganizationRow
from parley.errors import Unavailable

pytestmark = pytest.mark.anyio

_ORGANIZATIONS = OrganizationRow.__table__
_NAME_OF = select(_ORGANIZATIONS.c.name).where(_ORGANIZATIONS.c.id == bindparam("id"))
_CREATED_AT = select(_ORGANIZATIONS.c.name, _ORGANIZATIONS.c.created_at).where(
    _ORGANIZATIONS.c.id == bindparam("id")
)


def count_hops(database: Database, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Note each read that takes a reading thread's hop (`DirectReads.execute`)."""
    assert database.direct_reads is not None
    hops: list[object] = []
    original = database.direct_reads.execute

    async def counted(statement: Any, parameters: Any = None) -> Any:
        hops.append(statement)
        return await original(statement, parameters)

    monkeypatch.setattr(database.direct_reads, "execute", counted)
    return hops


async def _opened(database: Database, org_id: str, name: str) -> InlineReads:
    """Add an organization, then read it once: the loop's connection is open."""
    await _add_organization(database, org_id, name)
    assert database.inline_reads is not None
    async with database.point_read() as connection:
        await connection.execute(_NAME_OF, {"id": org_id})
    return database.inline_reads


async def _add_organization(database: Database, org_id: str, name: str) -> None:
    async with database.transaction() as session:
        session.add(OrganizationRow(id=org_id, name=name, created_at=datetime.now(UTC)))


async def test_point_read_finds_row_by_key_and_sees_commits_at_once(database: Database) -> None:
    if database.dialect != "sqlite":
        assert database.inline_reads is None  # PostgreSQL: `statement()`, a pooled connection
    async with database.point_read() as connection:
        assert (await connection.execute(_NAME_OF, {"id": "org_point"})).scalar() is None
    await _add_organization(database, "org_point", "point")
    async with database.point_read() as connection:
        assert (await connection.execute(_NAME_OF, {"id": "org_point"})).scalar() == "point"
    async with database.point_read() as connection:  # a repository's statement, unchanged
        assert await conversation_repo.status_of(connection, "org_point", "conv_none") is None


async def test_point_read_converts_columns_as_statement_does(database: Database) -> None:
    """A column that needs converting (a time) comes back as `statement()` returns it."""
    await _add_organization(database, "org_typed", "typed")
    async with database.point_read() as connection:
        inline = (await connection.execute(_CREATED_AT, {"id": "org_typed"})).one()
    async with database.statement() as connection:
        hopped = (await connection.execute(_CREATED_AT, {"id": "org_typed"})).one()
    assert tuple(inline) == tuple(hopped)
    assert isinstance(inline.created_at, datetime)


async def test_point_read_on_sqlite_runs_in_event_loop_thread(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = sqlite_database
    inline = await _opened(database, "org_inline", "inline")
    hops = count_hops(database, monkeypatch)
    ran: list[tuple[int, str]] = []  # SQLite calls this in the thread that runs the statement
    inline.observe(lambda sql: ran.append((threading.get_ident(), sql)))
    for _ in range(10):
        async with database.point_read() as connection:
            result = await connection.execute(_NAME_OF, {"id": "org_inline"})  # sqlite3 alone
            assert result.scalar() == "inline"
            converted = await connection.execute(_CREATED_AT, {"id": "org_inline"})
            assert isinstance(converted.one().created_at, datetime)  # SQLAlchemy's types
    selects = [(thread, sql) for thread, sql in ran if sql.startswith("SELECT organizations")]
    assert len(selects) == 20
    assert {thread for thread, _sql in ran} == {threading.get_ident()}  # the loop's thread
    assert hops == []


async def test_point_read_on_busy_sqlite_takes_thread_hop_loop_never_waits(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = sqlite_database
    inline = await _opened(database, "org_busy", "busy")
    loop_connection = inline._connection
    assert loop_connection is not None
    # SQLite never waits in the loop: it answers busy at once, and the read goes elsewhere.
    assert loop_connection.execute("PRAGMA busy_timeout").fetchone() == (0,)

    class AnswersBusy:
        """What SQLite answers a reader while another connection recovers the WAL."""

        def __init__(self, code: int) -> None:
            self.code = code

        def execute(self, *_args: object) -> object:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = self.code
            raise error

    class EngineAnswersBusy:
        """The same answer through SQLAlchemy, for a statement with converted columns."""

        @contextmanager
        def connect(self) -> Iterator[AnswersBusy]:
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = sqlite3.SQLITE_BUSY
            raise OperationalError("SELECT …", {}, error)
            yield AnswersBusy(0)  # never reached

    hops = count_hops(database, monkeypatch)
    for code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY | (1 << 8), sqlite3.SQLITE_LOCKED):
        monkeypatch.setattr(inline, "_connection", AnswersBusy(code))
        async with database.point_read() as connection:
            assert (await connection.execute(_NAME_OF, {"id": "org_busy"})).scalar() == "busy"
    monkeypatch.setattr(inline, "_engine", EngineAnswersBusy())
    async with database.point_read() as connection:
        converted = (await connection.execute(_CREATED_AT, {"id": "org_busy"})).one()
    assert converted.name == "busy"
    assert isinstance(converted.created_at, datetime)
    assert len(hops) == 4  # each read answered busy took the reading thread's hop


async def test_point_read_on_sqlite_other_errors_are_503(
    sqlite_database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = sqlite_database
    assert database.inline_reads is not None

    class DiskIOError:
        def execute(self, *_args: object) -> object:
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = sqlite3.SQLITE_IOERR
            raise error

    monkeypatch.setattr(database.inline_reads, "_connection", DiskIOError())
    with pytest.raises(Unavailable):
        async with database.point_read() as connection:
            await connection.execute(_NAME_OF, {"id": "org_any"})
