"""The interfaces of shared ephemeral state.

Each has an in-process implementation (`memory.py`: embedded mode and tests) and a Redis one
(`redis.py`: any number of instances). Implementations raise `parley.errors.Unavailable`
when their backend is down, so callers fail closed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class ReplayGuard(Protocol):
    """Remembers single-use keys (JWT `jti`s) until they expire."""

    async def claim(self, key: str, *, expires_at: float, issued_at: float) -> bool:
        """Record `key` until `expires_at` (Unix seconds); return False if it was already held.

        Atomic: of any number of concurrent claims of one key, exactly one returns True.
        `issued_at` (the token's `iat`) lets a guard that lost its records refuse keys that
        may have been used before the loss: it returns False for them too.
        """
        ...


@dataclass(frozen=True, slots=True)
class RateDecision:
    """The answer of a rate limiter: allowed, or retry after some whole seconds."""

    allowed: bool
    retry_after: int = 0


class RateLimiter(Protocol):
    """A token bucket per key: `rate_per_minute` sustained, up to `burst` at once."""

    async def hit(self, key: str) -> RateDecision:
        """Take one token from the bucket of `key`."""
        ...


class Revocations(Protocol):
    """Revoked credential IDs, visible to every instance until they would have expired."""

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        """Mark `credential_id` revoked until `expires_at` (Unix seconds)."""
        ...

    async def is_revoked(self, credential_id: str) -> bool:
        """Tell whether `credential_id` was revoked."""
        ...


class StoreHealth(Protocol):
    """Whether the stores shared by the instances answer (`GET /health`)."""

    async def check(self) -> None:
        """Return when the stores answer; raise Unavailable, saying which, otherwise."""
        ...


class Throttle(Protocol):
    """Allows an action on a key at most once per window, across every instance."""

    async def try_acquire(self, key: str, *, window_seconds: float) -> bool:
        """Return True, and start the window, if the action on `key` may run now."""
        ...

    async def seconds_left(self, key: str) -> float:
        """Return how long the open window of `key` lasts yet (0 when none is open)."""
        ...


class ChangeFeed(Protocol):
    """Tells every instance whose data changed, so each drops its copies (the read model).

    Delivery is best effort: a message can be lost (a reconnect, a network split), so a
    reader of the feed must bound its staleness another way (services/read_model.py).
    """

    async def publish(self, org_id: str) -> None:
        """Announce that an organization's data changed (after the commit)."""
        ...

    async def listen(self, on_change: Callable[[str | None], None]) -> None:
        """Call `on_change(org_id)` for each change announced by any instance, and
        `on_change(None)` whenever announcements may have been missed (on each
        (re)subscription); run until cancelled."""
        ...


@dataclass(frozen=True, slots=True)
class LeaseDecision:
    """The answer of `CappedLeases.take`: held, or refused by the cap of group `full`."""

    held: bool
    added: bool = False
    """The member was not held before this take (undoing the take releases it)."""
    full: str | None = None


class CappedLeases(Protocol):
    """Members counted in groups, each group with an optional cap, each member until its
    lease runs out unless renewed: the active conversations of projects and organizations.

    A member whose lease ran out is no member: it is never counted and never blocks a take.
    """

    async def take(
        self, member: str, groups: Sequence[tuple[str, int | None]], *, lease_seconds: float
    ) -> LeaseDecision:
        """Hold `member` in every group (a `(group, cap)` pair; cap None: unlimited) for
        `lease_seconds`, unless a group that does not hold it holds its cap already.

        Atomic: of any number of concurrent takes, no group ever holds more than its cap. A
        member held in every group already is renewed and never refused.
        """
        ...

    async def renew(
        self, held: Sequence[tuple[str, Sequence[str]]], *, lease_seconds: float
    ) -> None:
        """Hold each member (with its groups) `lease_seconds` from now, caps unchecked."""
        ...

    async def release(self, member: str, groups: Sequence[str]) -> None:
        """Stop counting `member` in `groups` (nothing if it is not held)."""
        ...

    async def count(self, groups: Sequence[str]) -> list[int]:
        """Return how many members each group holds now."""
        ...
