"""Every driver failure that means "not available now" becomes 503; one that breaks its
connection makes the pool drop it; refused values are 400; conflicts stay conflicts."""

from __future__ import annotations

import sqlite3

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc

from parley.db.errors import breaks_connection, is_refused_value, is_unavailable, translated
from parley.errors import Conflict, InvalidRequest, Unavailable


def wrapped(cls: type[sa_exc.DBAPIError], orig: BaseException) -> sa_exc.DBAPIError:
    """A SQLAlchemy error wrapping a driver error, as the engine raises it."""
    return cls("SELECT 1", None, orig)  # type: ignore[arg-type]


def pg(cls: type[asyncpg.PostgresError], message: str = "") -> BaseException:
    return cls(message)


def lite(message: str, base: type[sqlite3.Error] = sqlite3.OperationalError) -> BaseException:
    """A SQLite failure as SQLAlchemy raises it."""
    kind = sa_exc.OperationalError if base is sqlite3.OperationalError else sa_exc.DatabaseError
    return wrapped(kind, base(message))


SA, PG = sa_exc, asyncpg


# (error, unavailable, breaks its connection)
ROWS = [
    ("pg-starting-up", pg(PG.CannotConnectNowError, "the database is starting up"), True, True),
    ("pg-admin-shutdown", pg(asyncpg.AdminShutdownError, "terminating connection"), True, True),
    ("pg-crash-shutdown", pg(asyncpg.CrashShutdownError, "crash"), True, True),
    ("pg-too-many-connections", pg(asyncpg.TooManyConnectionsError, "too many"), True, True),
    ("pg-connection-gone", pg(asyncpg.ConnectionDoesNotExistError, "closed"), True, True),
    ("pg-io-error", pg(asyncpg.PostgresIOError, "could not read"), True, True),
    ("pg-statement-timeout", pg(asyncpg.QueryCanceledError, "statement timeout"), True, False),
    ("pg-deadlock", pg(asyncpg.DeadlockDetectedError, "deadlock"), True, False),
    ("pg-serialization", pg(asyncpg.SerializationError, "serialize"), True, False),
    ("asyncpg-closed", asyncpg.InterfaceError("connection is closed"), True, True),
    ("refused", ConnectionRefusedError(111, "refused"), True, True),
    ("reset", ConnectionResetError(104, "reset"), True, True),
    ("client-timeout", TimeoutError(), True, True),
    ("pool-timeout", sa_exc.TimeoutError("QueuePool limit"), True, True),
    ("sa-wrapped-shutdown", wrapped(SA.DBAPIError, pg(PG.CannotConnectNowError)), True, True),
    ("sqlite-disk-io", lite("disk I/O error"), True, True),
    ("sqlite-not-a-database", lite("file is not a database", sqlite3.DatabaseError), True, True),
    ("sqlite-locked", lite("database is locked"), True, False),
    ("pg-unique", wrapped(SA.IntegrityError, pg(PG.UniqueViolationError)), False, False),
    ("pg-nul-byte", wrapped(SA.DataError, pg(PG.CharacterNotInRepertoireError)), False, False),
    ("bug", ValueError("a bug of ours"), False, False),
]  # fmt: skip
IDS = [row[0] for row in ROWS]
UNAVAILABLE = [row[1] for row in ROWS if row[2]]
UNAVAILABLE_IDS = [row[0] for row in ROWS if row[2]]


@pytest.mark.parametrize(
    ("error", "unavailable", "breaks"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_database_error_classified(error: BaseException, unavailable: bool, breaks: bool) -> None:
    assert is_unavailable(error) is unavailable
    assert breaks_connection(error) is breaks


@pytest.mark.parametrize(
    ("error", "unavailable"), [(r[1], r[2]) for r in ROWS if r[2]], ids=[r[0] for r in ROWS if r[2]]
)
def test_database_unavailable_translated_503_with_retry_after(
    error: BaseException, unavailable: bool
) -> None:
    assert unavailable
    with pytest.raises(Unavailable) as caught, translated():
        raise error
    assert caught.value.retry_after is not None
    assert caught.value.retry_after >= 1


def test_database_refused_value_translated_400() -> None:
    error = wrapped(sa_exc.DataError, pg(asyncpg.CharacterNotInRepertoireError, "0x00"))
    assert is_refused_value(error)
    with pytest.raises(InvalidRequest), translated():
        raise error


def test_database_unique_violation_translated_conflict() -> None:
    with pytest.raises(Conflict), translated():
        raise wrapped(sa_exc.IntegrityError, pg(asyncpg.UniqueViolationError, "dup"))


def test_database_unknown_error_not_translated() -> None:
    with pytest.raises(KeyError), translated():
        raise KeyError("a bug of ours")
