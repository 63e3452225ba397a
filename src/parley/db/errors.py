"""Translate database exceptions into Parley errors at the persistence boundary.

A database that cannot be reached becomes `Unavailable` (503, fail closed); a unique
constraint that loses a race becomes the Conflict that names it. Nothing from SQLAlchemy or
the drivers crosses this boundary.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from parley.errors import Conflict, ParleyError, Unavailable

log = logging.getLogger(__name__)

UniqueViolations = Mapping[str, type[Conflict]]
"""Constraint name (PostgreSQL) or `table.column` text (SQLite) -> the Conflict to raise."""


@contextmanager
def translated(unique_violations: UniqueViolations | None = None) -> Iterator[None]:
    """Run a block of database work, re-raising database failures as Parley errors."""
    try:
        yield
    except ParleyError:
        raise
    except sa_exc.IntegrityError as error:
        raise conflict_for(error, unique_violations or {}) from None
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as error:
        log.error("database unavailable: %s", type(error.orig or error).__name__)
        raise Unavailable() from None
    except sa_exc.TimeoutError:
        log.error("database unavailable: connection pool timed out")
        raise Unavailable() from None
    except sa_exc.DBAPIError as error:
        # A connection lost mid-query, or a database file that cannot be read (the bare
        # DatabaseError of "file is not a database"), is the database being unavailable.
        if error.connection_invalidated or type(error) in (
            sa_exc.DatabaseError,
            sa_exc.InternalError,
        ):
            log.error("database unavailable: %s", type(error.orig or error).__name__)
            raise Unavailable() from None
        raise
    except (OSError, ConnectionError) as error:
        log.error("database unreachable: %s", type(error).__name__)
        raise Unavailable() from None


def conflict_for(error: sa_exc.IntegrityError, violations: UniqueViolations) -> Conflict:
    """Return the Conflict that names the violated constraint, or a generic Conflict."""
    text = str(error.orig)
    for signature, conflict in violations.items():
        if signature in text:
            return conflict()
    log.warning("unmapped integrity error: %s", type(error.orig).__name__)
    return Conflict()
