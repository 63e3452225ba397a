"""In-process stores: embedded mode (one process) and tests.

Every operation runs without awaiting, so within one event loop it is atomic: of concurrent
claims of one key exactly one wins. The stores are not thread-safe and hold nothing across
processes; distributed mode uses `parley.stores.redis`.

Memory is bounded by live entries: each entry has one item in a min-heap by deadline, and
every call first pops the entries whose deadline has passed (O(log n) each), so expired keys
never accumulate. Absolute expiries (`expires_at`) follow `clock.time()`; windows and
bucket refills follow `clock.monotonic()`, so a wall-clock step cannot stretch them.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from parley.clock import Clock
from parley.stores.base import LeaseDecision, RateDecision

__all__ = [
    "MemoryCappedLeases",
    "MemoryRateLimiter",
    "MemoryReplayGuard",
    "MemoryRevocations",
    "MemoryThrottle",
]

V = TypeVar("V")


class _Expiring(Generic[V]):
    """A dict whose entries vanish at their deadline; purged from a heap, not by scanning.

    An entry is alive while `now < deadline`, as a Redis key is alive until its PXAT passes.
    A deadline is only ever extended. The heap holds one item per entry, at or before the
    entry's deadline; an item that surfaces early is pushed back at the extended deadline.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, V]] = {}
        self._heap: list[tuple[float, str]] = []

    def get(self, key: str, *, now: float) -> V | None:
        """Return the live value of `key`, after purging what expired by `now`."""
        self.purge(now=now)
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def holds(self, key: str, *, now: float) -> bool:
        """Tell whether `key` is alive at `now`."""
        self.purge(now=now)
        return key in self._entries

    def deadline(self, key: str, *, now: float) -> float | None:
        """Return when `key` vanishes, or None if it is not alive at `now`."""
        self.purge(now=now)
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: str, value: V, *, deadline: float, now: float) -> None:
        """Store `value` until `deadline`, or the key's current deadline if that is later.

        A new key whose deadline has already passed is not stored.
        """
        self.purge(now=now)
        current = self._entries.get(key)
        if current is not None:
            self._entries[key] = (max(deadline, current[0]), value)
        elif deadline > now:
            self._entries[key] = (deadline, value)
            heapq.heappush(self._heap, (deadline, key))

    def purge(self, *, now: float) -> None:
        """Drop every entry whose deadline is at or before `now`."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            deadline = self._entries[key][0]
            if deadline <= now:
                del self._entries[key]
            else:
                heapq.heappush(heap, (deadline, key))


class MemoryReplayGuard:
    """Single-use keys (JWT `jti`s) held in this process until `expires_at` (Unix seconds)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._held: _Expiring[None] = _Expiring()

    async def claim(
        self,
        key: str,
        *,
        expires_at: float,
        issued_at: float,  # noqa: ARG002
    ) -> bool:
        """Record `key` until `expires_at`; return False if it is already held.

        A key whose `expires_at` has already passed is not recorded (as in Redis). Records
        live as long as the process: embedded mode keeps them in the database instead
        (`parley.db.jti_claims`).
        """
        now = self._clock.time()
        if self._held.holds(key, now=now):
            return False
        self._held.put(key, None, deadline=expires_at, now=now)
        return True


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class MemoryRateLimiter:
    """Token buckets in this process: `rate_per_minute` sustained, `burst` at once, per key.

    A bucket is forgotten once it would have refilled to `burst`, which is the same as never
    having been used; so memory holds only the keys hit within about the last
    `burst / rate_per_minute` minutes.
    """

    def __init__(self, rate_per_minute: float, burst: int, clock: Clock) -> None:
        if not rate_per_minute > 0:
            raise ValueError("rate_per_minute must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self._rate = rate_per_minute / 60.0  # tokens per second
        self._burst = burst
        self._clock = clock
        self._buckets: _Expiring[_Bucket] = _Expiring()

    async def hit(self, key: str) -> RateDecision:
        """Take one token from the bucket of `key`; if none is left, say when one will be."""
        now = self._clock.monotonic()
        bucket = self._buckets.get(key, now=now)
        if bucket is None:  # never hit, or forgotten once it was full again
            tokens = float(self._burst)
        else:
            refill = max(0.0, now - bucket.stamp) * self._rate
            tokens = min(float(self._burst), bucket.tokens + refill)
        if tokens >= 1.0:
            decision = RateDecision(allowed=True)
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self._rate
            decision = RateDecision(allowed=False, retry_after=max(1, math.ceil(wait)))
        full_at = now + (self._burst - tokens) / self._rate
        self._buckets.put(key, _Bucket(tokens=tokens, stamp=now), deadline=full_at, now=now)
        return decision


class MemoryRevocations:
    """Revoked credential IDs held in this process until they would have expired."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._revoked: _Expiring[None] = _Expiring()

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        """Mark `credential_id` revoked until `expires_at`; a later revocation never shortens it."""
        self._revoked.put(credential_id, None, deadline=expires_at, now=self._clock.time())

    async def is_revoked(self, credential_id: str) -> bool:
        """Tell whether `credential_id` is revoked now."""
        return self._revoked.holds(credential_id, now=self._clock.time())


class MemoryStoreHealth:
    """In-process stores live in this process: when it answers, so do they."""

    async def check(self) -> None:
        """Return at once."""


class MemoryThrottle:
    """At most one action per key per window, in this process."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._windows: _Expiring[None] = _Expiring()

    async def try_acquire(self, key: str, *, window_seconds: float) -> bool:
        """Return True, and start a window of `window_seconds`, if no window of `key` is open."""
        if not window_seconds > 0:
            raise ValueError("window_seconds must be positive")
        now = self._clock.monotonic()
        if self._windows.holds(key, now=now):
            return False
        self._windows.put(key, None, deadline=now + window_seconds, now=now)
        return True

    async def seconds_left(self, key: str) -> float:
        """Return how long the open window of `key` lasts yet (0 when none is open)."""
        now = self._clock.monotonic()
        deadline = self._windows.deadline(key, now=now)
        return 0.0 if deadline is None else deadline - now


class MemoryChangeFeed:
    """The change feed of one process: what is published reaches its own listeners."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[str | None], None]] = []

    async def publish(self, org_id: str) -> None:
        """Tell this process's listeners at once."""
        for on_change in list(self._listeners):
            on_change(org_id)

    async def listen(self, on_change: Callable[[str | None], None]) -> None:
        """Deliver this process's announcements until cancelled (none can be missed)."""
        self._listeners.append(on_change)
        try:
            on_change(None)
            await asyncio.Event().wait()
        finally:
            self._listeners.remove(on_change)


class MemoryCappedLeases:
    """Capped groups of leased members in this process (embedded mode's active
    conversations). A group is a dict of member -> lease deadline (`clock.time()`); the
    members whose deadline passed are dropped whenever the group is read, and an empty
    group is forgotten, so memory holds only live leases."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._groups: dict[str, dict[str, float]] = {}

    def _live(self, group: str, now: float) -> dict[str, float]:
        members = self._groups.get(group)
        if members is None:
            return {}
        expired = [member for member, deadline in members.items() if deadline <= now]
        for member in expired:
            del members[member]
        if not members:
            del self._groups[group]
        return members

    async def take(
        self, member: str, groups: Sequence[tuple[str, int | None]], *, lease_seconds: float
    ) -> LeaseDecision:
        """Hold `member` in every group unless one that lacks it is full (no await: atomic)."""
        now = self._clock.time()
        live = [(group, cap, self._live(group, now)) for group, cap in groups]
        held = all(member in members for _, _, members in live)
        if not held:
            for group, cap, members in live:
                if cap is not None and member not in members and len(members) >= cap:
                    return LeaseDecision(held=False, full=group)
        for group, _, _ in live:
            self._groups.setdefault(group, {})[member] = now + lease_seconds
        return LeaseDecision(held=True, added=not held)

    async def renew(
        self, held: Sequence[tuple[str, Sequence[str]]], *, lease_seconds: float
    ) -> None:
        """Hold each member `lease_seconds` from now in its groups."""
        deadline = self._clock.time() + lease_seconds
        for member, groups in held:
            for group in groups:
                self._groups.setdefault(group, {})[member] = deadline

    async def release(self, member: str, groups: Sequence[str]) -> None:
        """Stop counting `member` in `groups`."""
        for group in groups:
            members = self._groups.get(group)
            if members is not None:
                members.pop(member, None)
                if not members:
                    del self._groups[group]

    async def count(self, groups: Sequence[str]) -> list[int]:
        """Return how many members each group holds now."""
        now = self._clock.time()
        return [len(self._live(group, now)) for group in groups]
