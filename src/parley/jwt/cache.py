"""Per-organization key cache: the JWKS refresh rules of API.md section 7.

Defaults and limits:

- keys live for the JWKS `Cache-Control: max-age` (clamped 5 min .. 24 h by `jwks.py`) and
  are refetched when it runs out, and at once when a token's `kid` is unknown;
- concurrent misses of one organization share one fetch (single flight in this process);
- fetches caused by misses or expiry happen at most once per 30 s per organization, through
  the injected `Throttle`, so the bound holds across instances when it is Redis-backed; an
  instance that loses that race reads the set its peer stored. Within one instance a miss
  consults the throttle and the store at most once per 5 s, so random `kid`s cost no I/O,
  and never later than the throttle's window closes: a miss after 30 s without a fetch
  fetches at once. Loading the stored set or an explicit refresh is no miss check;
- `refresh` (for `PUT /v1/auth/jwt` and `POST /v1/auth/jwt/refresh`) bypasses the throttle;
  its caller may hand it the store to write the result through (e.g. one that records the
  refresh in the same transaction): that write is then part of the refresh, so its failure
  fails the refresh and leaves the keys in memory as they were;
- a failed refresh keeps serving the last good keys for up to 24 h after their last
  successful fetch; a document with no usable key (`{"keys": []}`, only unusable keys) is a
  failed refresh too, so it never replaces good keys; with no usable keys at all,
  `JwksUnavailable` (503, Retry-After 30 s);
- the last good document goes to the injected `KeySetStore`, so restarts keep it and other
  instances read it;
- static keys (no JWKS URL) are served through the same API without any fetch.

Time comes from the injected Clock.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from parley.clock import Clock
from parley.errors import JwksUnavailable, Unavailable
from parley.jwt.errors import JwksFetchError
from parley.jwt.jwks import FetchedJwks
from parley.jwt.keys import Algorithm, KeySet, VerificationKey, load_jwks
from parley.jwt.policy import IssuerPolicy, KeySource
from parley.stores.base import Throttle

logger = logging.getLogger("parley.jwt")

MISS_FETCH_INTERVAL_SECONDS: Final = 30.0
LOCAL_RECHECK_SECONDS: Final = 5.0
STALE_SERVING_SECONDS: Final = 86_400.0
NO_USABLE_KEY: Final = "The JWKS holds no usable key."


@dataclass(frozen=True, slots=True)
class StoredJwks:
    """The last good JWKS of an organization, as persisted by a KeySetStore."""

    url: str
    document: Mapping[str, Any]
    fetched_at: float
    """Unix time of the successful fetch."""
    max_age_seconds: int
    error: str | None = None
    """The message of the last failed fetch since then, if any."""


class KeySetStore(Protocol):
    """Durable copy of each organization's last good JWKS (the database, in the service)."""

    async def load(self, org_id: str) -> StoredJwks | None:
        """Return the stored set of `org_id`, or None if it never had one."""
        ...

    async def save(self, org_id: str, jwks: StoredJwks) -> None:
        """Store a successful fetch, replacing the previous one and clearing the error."""
        ...

    async def save_error(self, org_id: str, *, url: str, error: str) -> None:
        """Record a failed fetch of `url`; keep the stored document as it is."""
        ...


class JwksSource(Protocol):
    """Fetches JWKS documents; `parley.jwt.JwksFetcher` is the real one."""

    async def fetch(self, url: str) -> FetchedJwks:
        """Return the document at `url` or raise JwksFetchError."""
        ...


@dataclass(frozen=True, slots=True)
class KeySetView:
    """What `GET /v1/auth/jwt` shows about the keys in force."""

    keys: tuple[VerificationKey, ...]
    fetched_at: float | None
    error: str | None


@dataclass(slots=True)
class _Entry:
    source: KeySource
    keys: KeySet
    fetched_at: float | None  # last successful fetch; None for static keys or none yet
    expires_at: float  # when a refresh is due
    usable_until: float  # fetched_at + 24 h; infinite for static keys; 0 when there are none
    quiet_until: float  # until then a miss consults neither the throttle, the store nor the URL
    error: str | None = None

    @classmethod
    def fetched(
        cls,
        source: KeySource,
        jwks: StoredJwks,
        *,
        quiet_until: float = -math.inf,
        keys: KeySet | None = None,
    ) -> _Entry:
        return cls(
            source=source,
            keys=keys if keys is not None else load_jwks(jwks.document),
            fetched_at=jwks.fetched_at,
            expires_at=jwks.fetched_at + jwks.max_age_seconds,
            usable_until=jwks.fetched_at + STALE_SERVING_SECONDS,
            quiet_until=quiet_until,
            error=jwks.error,
        )

    @classmethod
    def static(cls, source: KeySource, *, now: float) -> _Entry:
        keys = load_jwks({"keys": list(source.static_keys)})
        return cls(source, keys, None, math.inf, math.inf, quiet_until=now + LOCAL_RECHECK_SECONDS)

    @classmethod
    def missing(cls, source: KeySource, *, quiet_until: float) -> _Entry:
        """No key set at all, remembered so that misses stay throttled locally too."""
        return cls(source, KeySet(), None, 0.0, 0.0, quiet_until=quiet_until)


class KeyCache:
    """Each organization's parsed keys, refreshed under the rules in the module docstring."""

    def __init__(
        self, *, fetcher: JwksSource, store: KeySetStore, throttle: Throttle, clock: Clock
    ) -> None:
        self._fetcher = fetcher
        self._store = store
        self._throttle = throttle
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._flights: dict[tuple[str, str | None], asyncio.Task[None]] = {}

    async def key(self, source: KeySource, kid: str, alg: Algorithm) -> VerificationKey | None:
        """Return the one key named `kid` fitting `alg` (API.md section 7 step 3), or None.

        Raise JwksUnavailable when the organization has no usable key set at all.
        """
        entry = self._entries.get(source.org_id)
        now = self._clock.time()
        if entry is not None and (entry.source is source or entry.source == source):
            recently_checked = now < entry.quiet_until
            if now < entry.expires_at:
                found = entry.keys.get(kid, alg)
                if found is not None or recently_checked:
                    return found
            elif recently_checked:
                return self._usable(entry, now).get(kid, alg)
        await self._single_flight(source, lambda: self._sync(source, kid, alg))
        return self._usable(self._current(source), self._clock.time()).get(kid, alg)

    async def refresh(self, source: KeySource, *, store: KeySetStore | None = None) -> KeySetView:
        """Fetch the JWKS now, bypassing the miss throttle; raise JwksFetchError if it fails.

        For `PUT /v1/auth/jwt` and `POST /v1/auth/jwt/refresh`; static keys are just reloaded.
        The result (the new set, or the error) goes to `store` when given, and a failure of
        that write is raised with nothing changed in memory; without it, to the cache's own
        store, whose failures are only logged.
        """
        if source.jwks_url is None:
            self._entries[source.org_id] = _Entry.static(source, now=self._clock.time())
        else:
            await self._fetch(source, source.jwks_url, explicit=True, store=store)
        return await self.view(source)

    async def view(self, source: KeySource) -> KeySetView:
        """Describe the keys in force, loading them from the store if needed (never fetches)."""
        entry = self._current(source)
        if entry is None:
            entry = await self._load(source)
            if entry is not None:
                self._entries[source.org_id] = entry
        if entry is None:
            return KeySetView(keys=(), fetched_at=None, error=None)
        return KeySetView(keys=entry.keys.keys, fetched_at=entry.fetched_at, error=entry.error)

    def invalidate(self, org_id: str) -> None:
        """Forget an organization's keys, e.g. after its configuration changed."""
        self._entries.pop(org_id, None)

    def _current(self, source: KeySource) -> _Entry | None:
        entry = self._entries.get(source.org_id)
        return entry if entry is not None and entry.source == source else None

    def _usable(self, entry: _Entry | None, now: float) -> KeySet:
        if entry is None or now >= entry.usable_until:
            raise JwksUnavailable(retry_after=int(MISS_FETCH_INTERVAL_SECONDS))
        return entry.keys

    async def _single_flight(self, source: KeySource, work: Callable[[], Awaitable[None]]) -> None:
        slot = (source.org_id, source.jwks_url)  # a configuration change starts its own flight
        flight = self._flights.get(slot)
        if flight is None:
            flight = asyncio.ensure_future(work())
            self._flights[slot] = flight
            flight.add_done_callback(lambda done: self._landed(slot, done))
        # shield: a cancelled waiter must not cancel the fetch the others are waiting for.
        await asyncio.shield(flight)

    def _landed(self, slot: tuple[str, str | None], flight: asyncio.Task[None]) -> None:
        if self._flights.get(slot) is flight:
            del self._flights[slot]
        if not flight.cancelled():
            flight.exception()  # marks the exception retrieved even if every waiter left

    async def _sync(self, source: KeySource, kid: str, alg: Algorithm) -> None:
        """Bring the organization's keys up to date after a miss or an expiry (one flight)."""
        now = self._clock.time()
        entry = self._current(source)
        if entry is None:
            entry = await self._load(source)
            if entry is not None:
                self._entries[source.org_id] = entry
            if source.jwks_url is None or (
                entry is not None and now < entry.expires_at and entry.keys.get(kid, alg)
            ):
                return
        elif now < entry.quiet_until:
            return
        if source.jwks_url is None:  # static keys: nothing to fetch
            if entry is not None:
                entry.quiet_until = now + LOCAL_RECHECK_SECONDS
            return
        throttle_key = f"jwks-fetch:{source.org_id}"
        window = MISS_FETCH_INTERVAL_SECONDS
        if await self._throttle.try_acquire(throttle_key, window_seconds=window):
            await self._fetch(source, source.jwks_url, explicit=False)
            return
        # Quiet locally for a while, but never past the window: then a miss fetches again.
        left = await self._throttle.seconds_left(throttle_key)
        quiet_until = now + min(LOCAL_RECHECK_SECONDS, left)
        if entry is None:
            self._entries[source.org_id] = _Entry.missing(source, quiet_until=quiet_until)
            return
        entry.quiet_until = quiet_until
        stored = await self._load(source)
        if stored is not None and (stored.fetched_at or 0) > (entry.fetched_at or 0):
            stored.quiet_until = quiet_until
            self._entries[source.org_id] = stored  # a peer instance fetched a newer set

    async def _load(self, source: KeySource) -> _Entry | None:
        now = self._clock.time()
        if source.jwks_url is None:
            return _Entry.static(source, now=now)
        stored = await self._store.load(source.org_id)
        if stored is None or stored.url != source.jwks_url:
            return None
        return _Entry.fetched(source, stored)  # loading is no miss check: quiet_until -inf

    async def _fetch(
        self, source: KeySource, url: str, *, explicit: bool, store: KeySetStore | None = None
    ) -> None:
        """Fetch `url`, write the outcome to the store, then to memory.

        `explicit` (a refresh) raises the fetch's error; a `store` given by the caller must
        take the write, or the refresh fails before memory changes.
        """
        try:
            fetched = await self._fetcher.fetch(url)
            keys = load_jwks(fetched.document)
            if not len(keys):
                # A set with no usable key is a failed fetch, not a revocation of every
                # key: the last good keys stay in force (stale rules), as PUT refuses it.
                raise JwksFetchError(NO_USABLE_KEY)
        except JwksFetchError as exc:
            logger.warning("jwks fetch failed for org %s: %s", source.org_id, exc.message)
            error = exc.message
            if store is not None:
                await store.save_error(source.org_id, url=url, error=error)
            else:
                await self._stored(
                    self._store.save_error(source.org_id, url=url, error=error),
                    "jwks fetch error of org %s not stored",
                    source.org_id,
                )
            now = self._clock.time()
            entry = self._current(source)
            if entry is None:
                entry = _Entry.missing(source, quiet_until=-math.inf)
                self._entries[source.org_id] = entry
            entry.error, entry.expires_at = error, min(entry.expires_at, now)
            if explicit:  # a refresh is no miss check: it leaves the quiet period alone
                raise
            entry.quiet_until = now + LOCAL_RECHECK_SECONDS
            return
        stored = StoredJwks(url, fetched.document, self._clock.time(), fetched.max_age_seconds)
        if store is not None:
            await store.save(source.org_id, stored)
        else:
            # The keys are good; only their durable copy may be late.
            await self._stored(
                self._store.save(source.org_id, stored),
                "jwks of org %s fetched but not stored",
                source.org_id,
            )
        # After a miss's fetch the throttle's window is ours for 30 s: stay quiet a while.
        # A refresh is no miss check: a miss right after it may still fetch.
        quiet_until = -math.inf if explicit else stored.fetched_at + LOCAL_RECHECK_SECONDS
        self._entries[source.org_id] = _Entry.fetched(
            source, stored, quiet_until=quiet_until, keys=keys
        )

    @staticmethod
    async def _stored(write: Awaitable[None], failure: str, org_id: str) -> None:
        """Await a write to the cache's own store; an unavailable store is only logged."""
        try:
            await write
        except Unavailable:
            logger.warning(failure, org_id)


class CachedIssuerResolver:
    """An IssuerResolver: issuers from an async lookup, keys from a KeyCache (steps 2 and 3)."""

    def __init__(
        self, policies: Callable[[str], Awaitable[IssuerPolicy | None]], cache: KeyCache
    ) -> None:
        self._policies = policies
        self._cache = cache

    async def policy(self, iss: str) -> IssuerPolicy | None:
        """Return the policy of the organization that registered `iss`, or None."""
        return await self._policies(iss)

    async def key(self, policy: IssuerPolicy, kid: str, alg: Algorithm) -> VerificationKey | None:
        """Return the key for (`kid`, `alg`) from the organization's cached set."""
        return await self._cache.key(policy.keys, kid, alg)
