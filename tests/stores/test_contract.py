"""The stores' contract (stores/base.py), run against the in-process and the Redis stores.

Each test takes a `backend`: the memory one drives a ManualClock, the Redis one lets real time
pass (expiries of about a second) and reads "now" from the server, whose clock decides Redis
expiries. Store objects built from one backend share state, as every instance shares Redis.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

import anyio
import pytest
from redis.asyncio import Redis

from parley.clock import Clock
from parley.stores import (
    CappedLeases,
    LeaseDecision,
    RateDecision,
    RateLimiter,
    ReplayGuard,
    Revocations,
    StoreHealth,
    Throttle,
)
from parley.stores.memory import (
    MemoryCappedLeases,
    MemoryRateLimiter,
    MemoryReplayGuard,
    MemoryRevocations,
    MemoryStoreHealth,
    MemoryThrottle,
)
from parley.stores.redis import (
    RedisCappedLeases,
    RedisRateLimiter,
    RedisReplayGuard,
    RedisRevocations,
    RedisStoreHealth,
    RedisThrottle,
)

ISSUED_AT = time.time()
"""The `iat` of the claimed keys: now, after the data set of the test Redis began."""

pytestmark = pytest.mark.anyio

TTL = 1.0
"""Lifetime of the entries whose expiry is tested: short, since Redis cases really wait."""
SLACK = 0.15
"""Added to real waits so that an expiry has certainly passed on the Redis server."""


class AdvancingClock(Clock, Protocol):
    def advance(self, seconds: float) -> None: ...


class Backend(Protocol):
    """Builds stores over one shared state and controls the time they see."""

    def replay_guard(self) -> ReplayGuard: ...

    def rate_limiter(self, rate_per_minute: float, burst: int) -> RateLimiter: ...

    def revocations(self) -> Revocations: ...

    def throttle(self) -> Throttle: ...

    def health(self) -> StoreHealth: ...

    def capped_leases(self) -> CappedLeases: ...

    async def now(self) -> float:
        """Return the Unix time that decides the stores' expiries."""
        ...

    async def wait(self, seconds: float) -> None:
        """Let `seconds` pass for the stores."""
        ...


class MemoryBackend:
    def __init__(self, clock: AdvancingClock) -> None:
        self._clock = clock
        self._replay_guard = MemoryReplayGuard(clock)
        self._rate_limiters: dict[tuple[float, int], MemoryRateLimiter] = {}
        self._revocations = MemoryRevocations(clock)
        self._throttle = MemoryThrottle(clock)
        self._capped_leases = MemoryCappedLeases(clock)

    def replay_guard(self) -> ReplayGuard:
        return self._replay_guard

    def rate_limiter(self, rate_per_minute: float, burst: int) -> RateLimiter:
        settings = (rate_per_minute, burst)
        if settings not in self._rate_limiters:
            self._rate_limiters[settings] = MemoryRateLimiter(rate_per_minute, burst, self._clock)
        return self._rate_limiters[settings]

    def revocations(self) -> Revocations:
        return self._revocations

    def throttle(self) -> Throttle:
        return self._throttle

    def health(self) -> StoreHealth:
        return MemoryStoreHealth()

    def capped_leases(self) -> CappedLeases:
        return self._capped_leases

    async def now(self) -> float:
        return self._clock.time()

    async def wait(self, seconds: float) -> None:
        self._clock.advance(seconds)


class RedisBackend:
    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._prefix = prefix

    def replay_guard(self) -> ReplayGuard:
        return RedisReplayGuard(self._client, prefix=self._prefix)

    def rate_limiter(self, rate_per_minute: float, burst: int) -> RateLimiter:
        return RedisRateLimiter(rate_per_minute, burst, self._client, prefix=self._prefix)

    def revocations(self) -> Revocations:
        return RedisRevocations(self._client, prefix=self._prefix)

    def throttle(self) -> Throttle:
        return RedisThrottle(self._client, prefix=self._prefix)

    def health(self) -> StoreHealth:
        return RedisStoreHealth(self._client)

    def capped_leases(self) -> CappedLeases:
        return RedisCappedLeases(self._client, prefix=self._prefix)

    async def now(self) -> float:
        seconds, microseconds = await self._client.time()
        return seconds + microseconds / 1_000_000

    async def wait(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("redis", id="redis", marks=pytest.mark.redis),
    ]
)
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "memory":
        return MemoryBackend(request.getfixturevalue("clock"))
    return RedisBackend(
        request.getfixturevalue("redis_client"), request.getfixturevalue("redis_prefix")
    )


# --- ReplayGuard ----------------------------------------------------------------------


async def test_claim_first_time_succeeds_then_replay_refused(backend: Backend) -> None:
    expires_at = await backend.now() + 60
    assert (
        await backend.replay_guard().claim(
            "iss-a/jti-1", expires_at=expires_at, issued_at=ISSUED_AT
        )
        is True
    )
    assert (
        await backend.replay_guard().claim(
            "iss-a/jti-1", expires_at=expires_at, issued_at=ISSUED_AT
        )
        is False
    )


async def test_claim_other_key_independent(backend: Backend) -> None:
    guard = backend.replay_guard()
    expires_at = await backend.now() + 60
    assert await guard.claim("jti-1", expires_at=expires_at, issued_at=ISSUED_AT) is True
    assert await guard.claim("jti-2", expires_at=expires_at, issued_at=ISSUED_AT) is True
    assert await guard.claim("jti-1 ", expires_at=expires_at, issued_at=ISSUED_AT) is True


async def test_claim_held_until_expiry_then_forgotten(backend: Backend) -> None:
    guard = backend.replay_guard()
    assert (
        await guard.claim("jti", expires_at=await backend.now() + TTL, issued_at=ISSUED_AT) is True
    )
    await backend.wait(TTL / 2)
    assert (
        await guard.claim("jti", expires_at=await backend.now() + TTL, issued_at=ISSUED_AT) is False
    )
    await backend.wait(TTL / 2 + SLACK)
    assert (
        await guard.claim("jti", expires_at=await backend.now() + TTL, issued_at=ISSUED_AT) is True
    )


async def test_claim_already_expired_not_recorded(backend: Backend) -> None:
    guard = backend.replay_guard()
    past = await backend.now() - 1
    assert await guard.claim("jti", expires_at=past, issued_at=ISSUED_AT) is True
    assert await guard.claim("jti", expires_at=past, issued_at=ISSUED_AT) is True


async def test_claim_concurrent_exactly_one_succeeds(backend: Backend) -> None:
    expires_at = await backend.now() + 60
    results: list[bool] = []

    async def claim() -> None:
        results.append(
            await backend.replay_guard().claim("jti", expires_at=expires_at, issued_at=ISSUED_AT)
        )

    async with anyio.create_task_group() as tasks:
        for _ in range(50):
            tasks.start_soon(claim)

    assert len(results) == 50
    assert results.count(True) == 1


# --- RateLimiter ----------------------------------------------------------------------


async def test_hit_within_burst_allowed_then_refused_with_retry_after(backend: Backend) -> None:
    limiter = backend.rate_limiter(rate_per_minute=60, burst=20)
    decisions = [await limiter.hit("iss/sub/conv") for _ in range(20)]
    assert decisions == [RateDecision(allowed=True)] * 20
    # At 60 per minute the next token is at most one second away.
    assert await limiter.hit("iss/sub/conv") == RateDecision(allowed=False, retry_after=1)


async def test_hit_after_wait_refills_at_rate_per_minute(backend: Backend) -> None:
    limiter = backend.rate_limiter(rate_per_minute=120, burst=2)
    assert [(await limiter.hit("k")).allowed for _ in range(3)] == [True, True, False]
    await backend.wait(0.5 + SLACK)  # 2 tokens per second: one token, and a bit
    assert [(await limiter.hit("k")).allowed for _ in range(2)] == [True, False]


async def test_hit_after_long_idle_capped_at_burst(backend: Backend) -> None:
    limiter = backend.rate_limiter(rate_per_minute=600, burst=2)
    assert [(await limiter.hit("k")).allowed for _ in range(3)] == [True, True, False]
    await backend.wait(0.5)  # enough for 5 tokens at 10 per second
    assert [(await limiter.hit("k")).allowed for _ in range(3)] == [True, True, False]


async def test_hit_keys_independent(backend: Backend) -> None:
    limiter = backend.rate_limiter(rate_per_minute=60, burst=1)
    assert (await limiter.hit("iss/sub/conv-1")).allowed is True
    assert (await limiter.hit("iss/sub/conv-1")).allowed is False
    assert (await limiter.hit("iss/sub/conv-2")).allowed is True


async def test_hit_concurrent_allows_exactly_burst(backend: Backend) -> None:
    results: list[bool] = []

    async def hit() -> None:
        limiter = backend.rate_limiter(rate_per_minute=60, burst=20)
        results.append((await limiter.hit("k")).allowed)

    async with anyio.create_task_group() as tasks:
        for _ in range(30):
            tasks.start_soon(hit)

    assert len(results) == 30
    assert results.count(True) == 20


@pytest.mark.parametrize(("rate_per_minute", "burst"), [(0, 20), (-1, 20), (60, 0)])
async def test_rate_limiter_invalid_settings_refused(
    backend: Backend, rate_per_minute: float, burst: int
) -> None:
    with pytest.raises(ValueError, match="must be"):
        backend.rate_limiter(rate_per_minute=rate_per_minute, burst=burst)


# --- Revocations ----------------------------------------------------------------------


async def test_revoke_visible_only_for_that_id(backend: Backend) -> None:
    await backend.revocations().revoke("sess_1", expires_at=await backend.now() + 60)
    assert await backend.revocations().is_revoked("sess_1") is True
    assert await backend.revocations().is_revoked("sess_2") is False


async def test_revoke_expires_and_earlier_expiry_does_not_shorten(backend: Backend) -> None:
    revocations = backend.revocations()
    now = await backend.now()
    await revocations.revoke("sess", expires_at=now + TTL)
    await revocations.revoke("sess", expires_at=now + TTL / 4)
    await backend.wait(TTL / 2)
    assert await revocations.is_revoked("sess") is True
    await backend.wait(TTL / 2 + SLACK)
    assert await revocations.is_revoked("sess") is False


# --- Throttle -------------------------------------------------------------------------


async def test_try_acquire_once_per_window(backend: Backend) -> None:
    throttle = backend.throttle()
    assert await throttle.try_acquire("org_1", window_seconds=TTL) is True
    assert await backend.throttle().try_acquire("org_1", window_seconds=TTL) is False
    assert await throttle.try_acquire("org_2", window_seconds=TTL) is True
    await backend.wait(TTL + SLACK)
    assert await throttle.try_acquire("org_1", window_seconds=TTL) is True
    assert await throttle.try_acquire("org_1", window_seconds=TTL) is False


async def test_seconds_left_of_the_open_window(backend: Backend) -> None:
    """What a refused caller may wait before the window closes (the JWKS miss rule)."""
    throttle = backend.throttle()
    assert await throttle.seconds_left("org_1") == 0
    await throttle.try_acquire("org_1", window_seconds=60)
    assert 59 <= await backend.throttle().seconds_left("org_1") <= 60
    assert await throttle.seconds_left("org_2") == 0


@pytest.mark.parametrize("window_seconds", [0, -1])
async def test_try_acquire_empty_window_refused(backend: Backend, window_seconds: float) -> None:
    with pytest.raises(ValueError, match="window_seconds"):
        await backend.throttle().try_acquire("org_1", window_seconds=window_seconds)


# --- Health -----------------------------------------------------------------------------


async def test_health_check_passes_while_the_stores_answer(backend: Backend) -> None:
    health = backend.health()
    await asyncio.gather(*(health.check() for _ in range(5)))  # concurrent checks share one
    await health.check()


# --- CappedLeases -----------------------------------------------------------------------


async def test_take_within_caps_held_then_full_group_named(backend: Backend) -> None:
    leases = backend.capped_leases()
    groups = [("org", 3), ("project", 2)]
    assert await leases.take("c1", groups, lease_seconds=60) == LeaseDecision(True, added=True)
    assert (await leases.take("c2", groups, lease_seconds=60)).held is True
    assert await leases.take("c3", groups, lease_seconds=60) == LeaseDecision(
        held=False, full="project"
    )
    assert (await leases.take("c3", [("org", 3), ("other", None)], lease_seconds=60)).held
    assert await leases.take("c4", [("org", 3), ("other", None)], lease_seconds=60) == (
        LeaseDecision(held=False, full="org")
    )
    assert await leases.count(["org", "project", "other", "none"]) == [3, 2, 1, 0]


async def test_take_member_already_held_renewed_never_refused(backend: Backend) -> None:
    leases = backend.capped_leases()
    groups = [("org", 1), ("project", 1)]
    assert (await leases.take("c1", groups, lease_seconds=60)).added is True
    again = await leases.take("c1", groups, lease_seconds=60)
    assert again == LeaseDecision(held=True, added=False)
    assert await leases.count(["org", "project"]) == [1, 1]


async def test_take_lease_lapsed_member_no_longer_counted(backend: Backend) -> None:
    leases = backend.capped_leases()
    groups = [("org", 1)]
    assert (await leases.take("c1", groups, lease_seconds=TTL)).held
    assert not (await leases.take("c2", groups, lease_seconds=TTL)).held
    await backend.wait(TTL + SLACK)
    assert await leases.count(["org"]) == [0]
    assert (await leases.take("c2", groups, lease_seconds=60)).held


async def test_renew_extends_lease_past_its_first_expiry(backend: Backend) -> None:
    leases = backend.capped_leases()
    assert (await leases.take("c1", [("org", 1)], lease_seconds=TTL)).held
    await leases.renew([("c1", ["org"])], lease_seconds=60)
    await backend.wait(TTL + SLACK)
    assert await leases.count(["org"]) == [1]
    assert not (await leases.take("c2", [("org", 1)], lease_seconds=60)).held


async def test_release_frees_the_slot_in_every_group(backend: Backend) -> None:
    leases = backend.capped_leases()
    groups = [("org", 1), ("project", 1)]
    assert (await leases.take("c1", groups, lease_seconds=60)).held
    await leases.release("c1", ["org", "project"])
    await leases.release("c1", ["org", "project"])  # nothing held: nothing happens
    assert await leases.count(["org", "project"]) == [0, 0]
    assert (await leases.take("c2", groups, lease_seconds=60)).held


async def test_take_concurrent_never_past_the_cap(backend: Backend) -> None:
    leases = backend.capped_leases()
    decisions = await asyncio.gather(
        *(
            leases.take(f"c{i}", [("org", 10), (f"project{i % 2}", 7)], lease_seconds=60)
            for i in range(60)
        )
    )
    assert sum(decision.held for decision in decisions) == 10
    assert await leases.count(["org"]) == [10]
    assert all(count <= 7 for count in await leases.count(["project0", "project1"]))


# --- Across stores --------------------------------------------------------------------


async def test_stores_same_key_do_not_collide(backend: Backend) -> None:
    expires_at = await backend.now() + 60
    assert (
        await backend.replay_guard().claim("same", expires_at=expires_at, issued_at=ISSUED_AT)
        is True
    )
    assert await backend.revocations().is_revoked("same") is False
    assert await backend.throttle().try_acquire("same", window_seconds=60) is True
    assert (await backend.rate_limiter(rate_per_minute=60, burst=1).hit("same")).allowed is True
    await backend.revocations().revoke("same", expires_at=expires_at)
    assert await backend.revocations().is_revoked("same") is True
    assert (
        await backend.replay_guard().claim("same", expires_at=expires_at, issued_at=ISSUED_AT)
        is False
    )
