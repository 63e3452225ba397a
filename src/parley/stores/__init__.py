"""Shared ephemeral state, behind small interfaces (base.py): replay records, rate limits,
revocations, throttles, the change feed, active conversations' leases, and whether they
answer.

The package exports only the Protocols. Implementations are chosen by the composition root
(`parley.composition`): in-process ones (`parley.stores.memory`) for embedded mode and
tests, Redis ones (`parley.stores.redis`) for a fleet. So importing the JWT kernel or the
services never loads redis-py.
"""

from parley.stores.base import (
    CappedLeases,
    ChangeFeed,
    LeaseDecision,
    RateDecision,
    RateLimiter,
    ReplayGuard,
    Revocations,
    StoreHealth,
    Throttle,
)

__all__ = [
    "CappedLeases",
    "ChangeFeed",
    "LeaseDecision",
    "RateDecision",
    "RateLimiter",
    "ReplayGuard",
    "Revocations",
    "StoreHealth",
    "Throttle",
]
