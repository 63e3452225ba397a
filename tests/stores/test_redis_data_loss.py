"""The Redis replay guard notices that Redis lost its records (issue #9 finding 9): keys
issued before the loss are refused, later ones are claimed. A restart is tested in
tests/faults/test_redis_outage.py; here the records vanish under a running server."""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from parley.stores.redis import RedisReplayGuard

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


async def test_redis_data_loss_marker_written_once_and_kept(
    redis_client: Redis, redis_prefix: str
) -> None:
    first = await RedisReplayGuard(redis_client, prefix=redis_prefix).establish()
    again = await RedisReplayGuard(redis_client, prefix=redis_prefix).establish()
    assert first == again  # every instance reads the same start of the data set
    assert first <= time.time()


async def test_redis_data_loss_keys_issued_before_loss_refused_later_ones_claimed(
    redis_client: Redis, redis_prefix: str
) -> None:
    guard = RedisReplayGuard(redis_client, prefix=redis_prefix)
    await guard.establish()
    issued = time.time() - 1
    assert await guard.claim("used", expires_at=time.time() + 60, issued_at=issued)
    async for name in redis_client.scan_iter(match=f"{redis_prefix}*"):
        await redis_client.delete(name)  # the records vanish (FLUSHALL, eviction)
    assert not await guard.claim("used", expires_at=time.time() + 60, issued_at=issued)
    assert not await guard.claim("unseen-old", expires_at=time.time() + 60, issued_at=issued)
    later = time.time() + 1
    assert await guard.claim("new", expires_at=time.time() + 60, issued_at=later)
    assert not await guard.claim("new", expires_at=time.time() + 60, issued_at=later)


async def test_redis_data_loss_not_assumed_for_a_data_set_already_marked(
    redis_client: Redis, redis_prefix: str
) -> None:
    since = await RedisReplayGuard(redis_client, prefix=redis_prefix).establish()
    issued = since  # issued as the data set began: nothing was lost after it
    fresh_instance = RedisReplayGuard(redis_client, prefix=redis_prefix)
    assert await fresh_instance.claim("k", expires_at=time.time() + 60, issued_at=issued)
