"""The change feed (stores.ChangeFeed): in process, and Redis pub/sub shared by instances."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import pytest
from redis.asyncio import Redis
from tests.faults.redis_server import RedisServer

from parley.errors import Unavailable
from parley.stores.memory import MemoryChangeFeed
from parley.stores.redis import RedisChangeFeed, connect_redis

pytestmark = pytest.mark.anyio


async def _next(heard: asyncio.Queue[str | None]) -> str | None:
    return await asyncio.wait_for(heard.get(), 5)


async def test_change_feed_memory_delivers_to_listeners_after_none() -> None:
    feed = MemoryChangeFeed()
    heard: asyncio.Queue[str | None] = asyncio.Queue()
    listening = asyncio.create_task(feed.listen(heard.put_nowait))
    assert await _next(heard) is None

    await feed.publish("org_a")

    assert heard.get_nowait() == "org_a"
    listening.cancel()
    await asyncio.gather(listening, return_exceptions=True)


@pytest.mark.redis
async def test_change_feed_redis_reaches_another_client(redis_client: Redis) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    listener = RedisChangeFeed(redis_client, prefix=prefix)
    heard: asyncio.Queue[str | None] = asyncio.Queue()
    listening = asyncio.create_task(listener.listen(heard.put_nowait))
    try:
        assert await _next(heard) is None  # subscribed
        other = RedisChangeFeed(redis_client, prefix=prefix)
        await other.publish("org_b")
        assert await _next(heard) == "org_b"
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis of this test's own: it cuts the subscriptions (never the shared server's)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.destroy()


async def test_change_feed_redis_resubscribes_and_reports_a_possible_loss(
    own_redis: RedisServer,
) -> None:
    """A killed subscription is resubscribed, and the gap is reported as None: messages
    published meanwhile are lost, and the listener must assume so."""
    client = connect_redis(own_redis.url)
    feed = RedisChangeFeed(client, prefix="test:")
    heard: asyncio.Queue[str | None] = asyncio.Queue()
    listening = asyncio.create_task(feed.listen(heard.put_nowait))
    try:
        assert await _next(heard) is None
        await client.client_kill_filter(_type="pubsub")
        assert await _next(heard) is None  # resubscribed: whatever was sent meanwhile is lost
        await feed.publish("org_c")
        assert await _next(heard) == "org_c"
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await client.aclose()


async def test_change_feed_redis_publish_unreachable_is_unavailable() -> None:
    client = connect_redis("redis://127.0.0.1:1/0", timeout=0.5)
    try:
        with pytest.raises(Unavailable):
            await RedisChangeFeed(client).publish("org_d")
    finally:
        await client.aclose()
