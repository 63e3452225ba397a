"""The Redis stores fail closed: every redis-py failure surfaces as parley.errors.Unavailable.

As httpx's tests check that every httpcore exception is mapped, these raise every exception
class `redis.exceptions` defines (and the OSErrors sockets raise) inside a real redis-py
client, and expect Unavailable from each store operation.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis import exceptions as redis_exceptions
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection

from parley.errors import Unavailable
from parley.stores.redis import (
    RedisRateLimiter,
    RedisReplayGuard,
    RedisRevocations,
    RedisThrottle,
    connect_redis,
)

ISSUED_AT = time.time()
"""The `iat` of the claimed keys: now, after the data set of the test Redis began."""

pytestmark = pytest.mark.anyio

Operation = Callable[[Redis], Awaitable[object]]

EXPIRES_AT = 4_102_444_800.0  # 2100-01-01

OPERATIONS = [
    pytest.param(
        lambda client: RedisReplayGuard(client).claim(
            "jti", expires_at=EXPIRES_AT, issued_at=ISSUED_AT
        ),
        id="claim",
    ),
    pytest.param(lambda client: RedisRateLimiter(60, 20, client).hit("k"), id="hit"),
    pytest.param(
        lambda client: RedisRevocations(client).revoke("sess", expires_at=EXPIRES_AT), id="revoke"
    ),
    pytest.param(lambda client: RedisRevocations(client).is_revoked("sess"), id="is_revoked"),
    pytest.param(
        lambda client: RedisThrottle(client).try_acquire("org", window_seconds=30),
        id="try_acquire",
    ),
]


def _redis_exception_classes() -> list[type[BaseException]]:
    return [
        cls
        for _, cls in inspect.getmembers(redis_exceptions, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == redis_exceptions.__name__
    ]


def _instance(cls: type[BaseException]) -> BaseException:
    # Cluster redirections parse their message as "<slot> <host>:<port>".
    if issubclass(cls, redis_exceptions.AskError):
        return cls("3999 127.0.0.1:6381")
    return cls("simulated failure")


FAILURES = [
    *(pytest.param(cls, id=cls.__name__) for cls in _redis_exception_classes()),
    pytest.param(OSError, id="builtins.OSError"),
    pytest.param(ConnectionRefusedError, id="builtins.ConnectionRefusedError"),
    pytest.param(TimeoutError, id="builtins.TimeoutError"),
]


class FailingPool(ConnectionPool):
    """A pool whose every checkout raises `error`, as a dead or broken server would."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def get_connection(self, *_args: Any, **_options: Any) -> AbstractConnection:
        raise self.error


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
async def down_redis(anyio_backend: str) -> AsyncIterator[Redis]:
    client = connect_redis(f"redis://127.0.0.1:{_closed_port()}/0", timeout=0.5)
    yield client
    await client.aclose()


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_operation_redis_down_raises_unavailable(
    down_redis: Redis, operation: Operation
) -> None:
    with pytest.raises(Unavailable) as caught:
        await operation(down_redis)
    assert isinstance(caught.value.__cause__, redis_exceptions.ConnectionError)


def test_redis_exception_classes_found() -> None:
    names = {cls.__name__ for cls in _redis_exception_classes()}
    assert {"RedisError", "ConnectionError", "TimeoutError", "ResponseError"} <= names


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("error_class", FAILURES)
async def test_operation_redis_error_mapped_to_unavailable(
    operation: Operation, error_class: type[BaseException], anyio_backend: str
) -> None:
    error = _instance(error_class)
    client = Redis(connection_pool=FailingPool(error))
    try:
        with pytest.raises(Unavailable) as caught:
            await operation(client)
    finally:
        await client.aclose()
    assert caught.value.__cause__ is error


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_operation_cancelled_not_mapped(operation: Operation, anyio_backend: str) -> None:
    client = Redis(connection_pool=FailingPool(asyncio.CancelledError()))
    try:
        with pytest.raises(asyncio.CancelledError):
            await operation(client)
    finally:
        await client.aclose()
