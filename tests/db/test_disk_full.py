"""A full disk is named as such: SQLite's SQLITE_FULL, PostgreSQL's 53100 or ENOSPC become a
503 whose message (and log line) says the disk is full (issue #22 item 4)."""

from __future__ import annotations

import errno
import logging
import sqlite3

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc

from parley.db.errors import DISK_FULL, is_disk_full, translated
from parley.errors import Unavailable


def sqlite_full() -> BaseException:
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = 13
    return sa_exc.OperationalError("INSERT", None, error)


FULL = [
    pytest.param(sqlite_full(), id="sqlite-full"),
    pytest.param(
        sa_exc.OperationalError("INSERT", None, asyncpg.DiskFullError("no space")),
        id="pg-53100",
    ),
    pytest.param(OSError(errno.ENOSPC, "No space left on device"), id="enospc"),
]
NOT_FULL = [
    pytest.param(
        sa_exc.OperationalError("SELECT", None, sqlite3.OperationalError("database is locked")),
        id="sqlite-busy",
    ),
    pytest.param(asyncpg.TooManyConnectionsError("too many"), id="pg-53300"),
    pytest.param(OSError(errno.ECONNREFUSED, "refused"), id="refused"),
]


@pytest.mark.parametrize("error", FULL)
def test_disk_full_errors_503_naming_the_full_disk(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    assert is_disk_full(error)
    with caplog.at_level(logging.ERROR), pytest.raises(Unavailable) as raised, translated():
        raise error
    assert raised.value.message == DISK_FULL
    assert "the disk is full" in caplog.text


@pytest.mark.parametrize("error", NOT_FULL)
def test_other_unavailable_errors_not_called_disk_full(error: BaseException) -> None:
    assert not is_disk_full(error)
    with pytest.raises(Unavailable) as raised, translated():
        raise error
    assert raised.value.message != DISK_FULL
