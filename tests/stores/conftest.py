"""Fixtures for the store tests: a hand-driven clock and a Redis confined to one test's keys.

Redis is never optional: when it cannot be reached the Redis cases fail with a message saying
how to point them at one (PARLEY_TEST_REDIS_URL) or deselect them (`-m "not redis"`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis

from parley.stores.redis import REDIS_ERRORS, connect_redis

DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/15"


class ManualClock:
    """A Clock that stands still until `advance` moves its wall and monotonic readings."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._time = start
        self._monotonic = 1_000.0

    def time(self) -> float:
        return self._time

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move both readings forward by `seconds`."""
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        self._time += seconds
        self._monotonic += seconds


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def redis_url() -> str:
    return os.environ.get("PARLEY_TEST_REDIS_URL") or DEFAULT_TEST_REDIS_URL


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


@pytest.fixture
async def redis_client(redis_url: str, anyio_backend: str) -> AsyncIterator[Redis]:
    """A client of the test Redis; an unreachable Redis fails the test, never skips it."""
    client = connect_redis(redis_url)
    try:
        try:
            await client.ping()
        except REDIS_ERRORS as exc:
            pytest.fail(
                f"Redis at {_without_password(redis_url)} is unreachable ({exc!r}). Start one, "
                'set PARLEY_TEST_REDIS_URL, or deselect these tests with -m "not redis".'
            )
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def redis_prefix(redis_client: Redis) -> AsyncIterator[str]:
    """A fresh key prefix; the keys under it, and only those, are deleted afterwards."""
    prefix = f"parley-test:{secrets.token_hex(8)}:"
    yield prefix
    names = [name async for name in redis_client.scan_iter(match=f"{prefix}*", count=1000)]
    if names:
        await redis_client.unlink(*names)
