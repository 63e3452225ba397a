"""A broken connection's shielded graceful close that times out alone is not an error report
(src/parley/db/orphaned_closes.py); every other unretrieved failure still is."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from parley.db.orphaned_closes import quiet_orphaned_closes

pytestmark = pytest.mark.anyio


async def _terminate_graceful_close() -> None:  # SQLAlchemy's coroutine, by name
    raise TimeoutError


async def _something_else() -> None:
    raise TimeoutError


async def _unretrieved(coroutine: Any) -> None:
    task = asyncio.ensure_future(coroutine)
    await asyncio.wait({task})
    del task
    gc.collect()  # the loop reports an unretrieved exception when its task is collected


async def test_orphaned_graceful_close_not_reported_other_failures_are() -> None:
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    reports: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    try:
        quiet_orphaned_closes()
        quiet_orphaned_closes()  # twice is once

        await _unretrieved(_terminate_graceful_close())
        assert reports == []

        await _unretrieved(_something_else())
        [report] = reports
        assert isinstance(report["exception"], TimeoutError)
        assert report["future"].get_coro().__name__ == "_something_else"
    finally:
        loop.set_exception_handler(before)
