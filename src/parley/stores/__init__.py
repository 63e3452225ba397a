"""Shared ephemeral state: in-process for embedded mode, Redis for a fleet.

The Redis implementations load on first use (PEP 562 `__getattr__`): importing the package,
or `parley.stores.base` through it, does not import redis-py, which keeps `parley.jwt` and the
command line light.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from parley.stores.base import RateDecision, RateLimiter, ReplayGuard, Revocations, Throttle
from parley.stores.memory import (
    MemoryRateLimiter,
    MemoryReplayGuard,
    MemoryRevocations,
    MemoryThrottle,
)

if TYPE_CHECKING:
    from parley.stores.redis import (
        RedisRateLimiter,
        RedisReplayGuard,
        RedisRevocations,
        RedisThrottle,
        connect_redis,
    )

_REDIS_NAMES = frozenset(
    {"RedisRateLimiter", "RedisReplayGuard", "RedisRevocations", "RedisThrottle", "connect_redis"}
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


def __getattr__(name: str) -> object:
    """Load the Redis implementations when one of them is first asked for."""
    if name not in _REDIS_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("parley.stores.redis"), name)
    globals()[name] = value
    return value
