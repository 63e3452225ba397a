"""SQLAlchemy's graceful close of a broken asyncpg connection, when its waiter is cancelled.

When a statement on PostgreSQL fails in a way that breaks its connection, SQLAlchemy closes
the connection gracefully inside `asyncio.shield` (its issue 10717) with asyncpg's 2 s
timeout, and forces the close when that fails or when the waiter is cancelled. Our bounded
waits (`db/engine.py: Timeouts`) do cancel that waiter on a hung server, and the shielded
close then goes on alone: 2 s later it fails with `TimeoutError`, which nobody retrieves, so
the event loop reports it as an error (and a test's loop fails on it). The connection was
force-closed already; the report is noise. `quiet_orphaned_closes` logs exactly that case
at DEBUG and hands everything else to the loop's handler as before.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

GRACEFUL_CLOSE = "_terminate_graceful_close"
"""The name of SQLAlchemy's shielded coroutine (sqlalchemy.connectors.asyncio)."""


def is_orphaned_close(context: dict[str, Any]) -> bool:
    """Whether the loop's report `context` is a shielded graceful close that timed out."""
    task = context.get("future")
    if not isinstance(task, asyncio.Task) or not isinstance(
        context.get("exception"), (TimeoutError, OSError)
    ):
        return False
    return getattr(task.get_coro(), "__name__", None) == GRACEFUL_CLOSE


def quiet_orphaned_closes() -> None:
    """From now on, the running loop's reports of orphaned graceful closes are logged at
    DEBUG, not as errors; the previous handler gets every other report.

    Installed for the loop's life, not undone when the database closes: the loop reports a
    task's unretrieved exception when the task is collected, which may be after (the
    traceback's cycle waits for the cyclic collector). Installing it twice is once.
    """
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    if getattr(previous, GRACEFUL_CLOSE, False):
        return

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if is_orphaned_close(context):
            log.debug("a broken connection's graceful close timed out; it was force-closed")
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    setattr(handle, GRACEFUL_CLOSE, True)
    loop.set_exception_handler(handle)
