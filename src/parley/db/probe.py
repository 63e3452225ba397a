"""Check, before serving, that the configured database can be opened, and say why not.

An operator who mistypes `PARLEY_DATABASE_URL` should read what is wrong (the directory that
does not exist, the port nobody listens on, the role or database the server does not know)
instead of a traceback or "try again later". The probe talks to the driver directly, with a
timeout, and raises `DatabaseProbeFailed` whose message never holds the password.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

from sqlalchemy.engine import URL, make_url

TIMEOUT_SECONDS = 5.0


class DatabaseProbeFailed(Exception):
    """The database named by the configuration cannot be used; the message says why."""


async def probe_database(url: str, *, wait_seconds: float = TIMEOUT_SECONDS) -> None:
    """Open the database at `url` once, or raise DatabaseProbeFailed with the reason."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        probe_sqlite(parsed.database)
    else:
        await probe_postgres(parsed, wait_seconds=wait_seconds)


def probe_sqlite(database: str | None) -> None:
    """Check that the SQLite file can be created, or opened for reading and writing."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).absolute()
    directory = path.parent
    if not directory.exists():
        raise DatabaseProbeFailed(f"the directory {directory} does not exist")
    if not directory.is_dir():
        raise DatabaseProbeFailed(f"{directory} is not a directory")
    if not path.exists():
        if not os.access(directory, os.W_OK | os.X_OK):
            raise DatabaseProbeFailed(f"cannot create {path}: the directory is not writable")
        _create_sqlite(path)  # what access() cannot tell (root in /proc, a read-only mount)
        return
    if path.is_dir():
        raise DatabaseProbeFailed(f"{path} is a directory, not a database file")
    if not os.access(path, os.R_OK | os.W_OK):
        raise DatabaseProbeFailed(f"cannot read and write {path} (permission denied)")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=1.0)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise DatabaseProbeFailed(f"{path} is not a usable SQLite database ({error})") from error


def _create_sqlite(path: Path) -> None:
    """Create the database file now, as serving would, or say why it cannot be."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=rwc", uri=True, timeout=1.0)
        try:
            connection.execute("PRAGMA user_version = 0")  # a write: the file must exist
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        raise DatabaseProbeFailed(f"cannot create {path} ({error})") from error


async def probe_postgres(url: URL, *, wait_seconds: float = TIMEOUT_SECONDS) -> None:
    """Connect to PostgreSQL once with asyncpg and close; explain a refusal."""
    import asyncpg

    host, port = url.host or "localhost", url.port or 5432
    where = f"PostgreSQL at {host}:{port}"
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        connection = await asyncpg.connect(dsn, timeout=wait_seconds)
    except asyncpg.InvalidPasswordError as error:
        raise DatabaseProbeFailed(
            f"{where} refused the password of role {url.username!r}"
        ) from error
    except asyncpg.InvalidAuthorizationSpecificationError as error:
        raise DatabaseProbeFailed(f"{where} refused the role: {error}") from error
    except asyncpg.InvalidCatalogNameError as error:
        raise DatabaseProbeFailed(f"{where}: {error}") from error
    except asyncpg.PostgresError as error:
        raise DatabaseProbeFailed(f"{where} refused the connection: {error}") from error
    except socket.gaierror as error:
        raise DatabaseProbeFailed(f"cannot resolve the host name {host!r}") from error
    except TimeoutError as error:
        raise DatabaseProbeFailed(f"no answer from {where} within {wait_seconds:g} s") from error
    except ConnectionRefusedError as error:
        raise DatabaseProbeFailed(
            f"cannot connect to {where} (connection refused: is PostgreSQL running there?)"
        ) from error
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise DatabaseProbeFailed(f"cannot connect to {where} ({reason.lower()})") from error
    await connection.close()
