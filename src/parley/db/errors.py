"""Translate database exceptions into Parley errors at the persistence boundary.

- A database that cannot serve now (down, restarting, shutting down, hung past its time
  bounds, out of connections, a damaged or locked SQLite file) becomes `Unavailable`: 503
  with `Retry-After`, fail closed. A full disk says so, in the log and in the error.
- A unique constraint that loses a race becomes the Conflict that names it.
- A value the database refuses (SQLSTATE class 22, a text it cannot encode) becomes
  `InvalidRequest` (400): the API refuses such values first, this is the safety net.

Nothing from SQLAlchemy or the drivers crosses this boundary. `breaks_connection` tells the
engine which failures leave a connection unusable, so the pool drops it (and the rest of
the pool with it) instead of handing it to the next request.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from sqlalchemy import exc as sa_exc

from parley.errors import Conflict, InvalidRequest, ParleyError, Unavailable

log = logging.getLogger(__name__)

UniqueViolations = Mapping[str, type[Conflict]]
"""Constraint name (PostgreSQL) or `table.column` text (SQLite) -> the Conflict to raise."""

RETRY_AFTER_SECONDS: Final = 2
"""`Retry-After` of a database that is not available now (a restart takes about that)."""

_UNAVAILABLE_SQLSTATE_CLASSES: Final = frozenset({"08", "40", "53", "55", "57", "58", "XX"})
"""PostgreSQL SQLSTATE classes that mean "not now": connection exception (08), transaction
rollback such as deadlock or serialization failure (40), insufficient resources such as too
many connections (53), lock not available (55), operator intervention such as admin
shutdown, "the database system is starting up" or a statement timeout (57), system I/O
error (58), internal error or data corrupted (XX)."""

_HEALTHY_SQLSTATES: Final = frozenset({"57014", "55P03", "55006"})
"""Failures of one statement on a connection that is still good: query canceled (the
statement timeout), lock not available, object in use. Class 40 is healthy too."""

_SQLITE_BUSY: Final = ("database is locked", "database table is locked", "busy")
_SQLITE_FULL: Final = 13
_DISK_FULL_SQLSTATE: Final = "53100"
DISK_FULL: Final = "The database cannot write: its disk is full. Try again later."
"""The message of the 503 (and of a socket's `error` frame) when the disk is full."""


@contextmanager
def translated(unique_violations: UniqueViolations | None = None) -> Iterator[None]:
    """Run a block of database work, re-raising database failures as Parley errors."""
    try:
        yield
    except ParleyError:
        raise
    except sa_exc.IntegrityError as error:
        raise conflict_for(error, unique_violations or {}) from None
    except Exception as error:
        if is_disk_full(error):
            log.error("database cannot write: the disk is full (%s)", _describe(error))
            raise Unavailable(DISK_FULL, retry_after=RETRY_AFTER_SECONDS) from None
        if is_unavailable(error):
            log.error("database unavailable: %s", _describe(error))
            raise Unavailable(retry_after=RETRY_AFTER_SECONDS) from None
        if is_refused_value(error):
            log.warning("database refused a value: %s", _describe(error))
            raise InvalidRequest("A value of the request cannot be stored.") from None
        raise


def is_disk_full(error: BaseException) -> bool:
    """Tell whether `error` (or what it wraps) says the database's disk is full: SQLite's
    SQLITE_FULL, PostgreSQL's SQLSTATE 53100 (disk_full), or an OSError ENOSPC."""
    for cause in _causes(error):
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return True
        if isinstance(cause, sqlite3.Error) and (
            getattr(cause, "sqlite_errorcode", None) == _SQLITE_FULL
            or "database or disk is full" in str(cause)
        ):
            return True
        if _sqlstate(cause) == _DISK_FULL_SQLSTATE:
            return True
    return False


def is_unavailable(error: BaseException) -> bool:
    """Tell whether `error` (or what it wraps) means the database cannot serve now."""
    return any(_unavailable(cause) for cause in _causes(error))


def breaks_connection(error: BaseException) -> bool:
    """Tell whether `error` leaves its connection unusable (so the pool must drop it)."""
    causes = list(_causes(error))
    if not any(_unavailable(cause) for cause in causes):
        return False
    return not any(_healthy_failure(cause) for cause in causes)


def is_refused_value(error: BaseException) -> bool:
    """Tell whether the database refused a value of the request (not a fault of its own)."""
    for cause in _causes(error):
        if isinstance(cause, sa_exc.DataError | UnicodeError):
            return True
        if _sqlstate(cause).startswith("22"):
            return True
        if type(cause).__name__ == "DataError" and type(cause).__module__.startswith("asyncpg"):
            return True
    return False


def conflict_for(error: sa_exc.IntegrityError, violations: UniqueViolations) -> Conflict:
    """Return the Conflict that names the violated constraint, or a generic Conflict."""
    text = str(error.orig)
    for signature, conflict in violations.items():
        if signature in text:
            return conflict()
    log.warning("unmapped integrity error: %s", type(error.orig).__name__)
    return Conflict()


def _causes(error: BaseException) -> Iterator[BaseException]:
    """Yield `error` and everything it wraps (`orig`, `__cause__`, `__context__`)."""
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending and len(seen) < 16:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for inner in (getattr(current, "orig", None), current.__cause__, current.__context__):
            if isinstance(inner, BaseException):
                pending.append(inner)


def _unavailable(error: BaseException) -> bool:
    if isinstance(error, sa_exc.TimeoutError | OSError):
        # Pool checkout timed out; refused, reset, timed out (TimeoutError is an OSError).
        return True
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError):
        return not _sqlstate(error).startswith("22")
    if isinstance(error, sqlite3.OperationalError | sqlite3.InternalError):
        return True
    if type(error) is sqlite3.DatabaseError or (
        isinstance(error, sa_exc.DBAPIError) and type(error) in _BARE_DBAPI_ERRORS
    ):
        # "file is not a database", "database disk image is malformed".
        return True
    state = _sqlstate(error)
    if state:
        return state[:2] in _UNAVAILABLE_SQLSTATE_CLASSES
    # asyncpg's client-side errors: "connection is closed", "another operation is in
    # progress" (a connection left mid-statement by a timeout), protocol errors.
    module = type(error).__module__
    return module.startswith("asyncpg") and not isinstance(error, ValueError)


_BARE_DBAPI_ERRORS: Final = (sa_exc.DatabaseError, sa_exc.InternalError)


def _healthy_failure(error: BaseException) -> bool:
    state = _sqlstate(error)
    if state.startswith("40") or state in _HEALTHY_SQLSTATES:
        return True
    text = str(error).lower()
    is_sqlite = isinstance(error, sqlite3.Error) or "sqlite" in type(error).__module__
    return is_sqlite and any(word in text for word in _SQLITE_BUSY)


def _sqlstate(error: BaseException) -> str:
    state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    return state if isinstance(state, str) else ""


def _describe(error: BaseException) -> str:
    """Name the innermost driver error (its type only: messages may quote values)."""
    names = [type(cause).__name__ for cause in _causes(error)]
    return " <- ".join(dict.fromkeys(names))
