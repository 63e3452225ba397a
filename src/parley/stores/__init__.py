"""Shared ephemeral state: in-process for embedded mode, Redis for a fleet."""

from parley.stores.base import RateDecision, RateLimiter, ReplayGuard, Revocations, Throttle
from parley.stores.memory import (
    MemoryRateLimiter,
    MemoryReplayGuard,
    MemoryRevocations,
    MemoryThrottle,
)
from parley.stores.redis import (
    RedisRateLimiter,
    RedisReplayGuard,
    RedisRevocations,
    RedisThrottle,
    connect_redis,
)

__all__ = [
    "MemoryRateLimiter",
    "MemoryReplayGuard",
    "MemoryRevocations",
    "MemoryThrottle",
    "RateDecision",
    "RateLimiter",
    "RedisRateLimiter",
    "RedisReplayGuard",
    "RedisRevocations",
    "RedisThrottle",
    "ReplayGuard",
    "Revocations",
    "Throttle",
    "connect_redis",
]
