"""Redis stores: shared by every instance of distributed mode (API.md section 11).

Each operation is one atomic Redis command, transaction or script, so concurrent instances
agree: replay claims are `SET NX PXAT`, throttle windows `SET NX PX`, revocations expiring
keys, rate limits a token bucket in a Lua script, and capped leases (active conversations)
sorted sets scored by lease expiry, taken in a Lua script.

Time. Expiries are decided by the Redis server's clock: absolute ones (`expires_at`) through
PXAT, relative ones through PX and the bucket script, which reads `TIME` on the server. So
instances whose clocks disagree still share one bucket and one window; no Clock is injected.

Keys. Caller keys (JWT `iss`, `jti`, `sub`, ...) never appear raw: a key is
`<prefix><kind>:<sha256 of the length-prefixed (kind, key)>`, so no input can forge another
key, collide across kinds or grow a key without bound.

Failures. Every redis-py error (connection refused, timeout, a server answering an error) and
every OSError surfaces as `parley.errors.Unavailable`, so callers fail closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Final

from redis import exceptions as redis_exceptions
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.maint_notifications import MaintNotificationsConfig

from parley import metrics
from parley.errors import Unavailable
from parley.shared_probe import SharedProbe
from parley.stores.base import LeaseDecision, RateDecision

__all__ = [
    "DEFAULT_PREFIX",
    "REDIS_ERRORS",
    "RedisCappedLeases",
    "RedisChangeFeed",
    "RedisRateLimiter",
    "RedisReplayGuard",
    "RedisRevocations",
    "RedisStoreHealth",
    "RedisThrottle",
    "connect_redis",
]

log = logging.getLogger(__name__)

DEFAULT_PREFIX: Final = "parley:"
DATA_SET_CHECK_SECONDS: Final = 2.0
"""How often each instance looks for a loss of Redis's data, so every instance notices it."""

REDIS_ERRORS: Final[tuple[type[Exception], ...]] = (
    redis_exceptions.RedisError,
    redis_exceptions.RedisClusterException,
    redis_exceptions.ChildDeadlockedError,
    redis_exceptions.IncorrectPolicyType,
    OSError,  # socket errors and the builtin TimeoutError/ConnectionError
)
"""What this module turns into `Unavailable`: every exception `redis.exceptions` defines."""


def connect_redis(url: str, *, timeout: float = 2.0, health_check_interval: int = 10) -> Redis:
    """Build a client for `url` (no I/O until the first command); close it with `aclose()`.

    Connecting and each reply time out after `timeout` seconds. Commands are never resent:
    a claim whose reply was lost must answer Unavailable, not "already claimed" on a retry.
    The pool already reconnects connections the server closed before it hands them out, and
    an idle connection is checked with PING after `health_check_interval` seconds.
    """
    return Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        health_check_interval=health_check_interval,
        retry=Retry(NoBackoff(), 0),
        # With maintenance notifications on ("auto", redis-py 8's default) the pool skips its
        # check that a pooled connection is still open, so after a Redis restart every
        # stale connection failed one command. Off, the pool replaces them before use.
        maint_notifications_config=MaintNotificationsConfig(enabled=False),
    )


@contextmanager
def _unavailable_on_redis_errors() -> Iterator[None]:
    try:
        yield
    except REDIS_ERRORS as exc:
        metrics.count_store_error("redis")
        raise Unavailable() from exc


def _length_prefixed(*parts: str) -> bytes:
    out = bytearray()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        out += len(data).to_bytes(8, "big")
        out += data
    return bytes(out)


def _redis_key(prefix: str, kind: str, key: str) -> str:
    digest = hashlib.sha256(_length_prefixed(kind, key)).hexdigest()
    return f"{prefix}{kind}:{digest}"


def _unix_ms(seconds: float) -> int:
    # PXAT refuses 0 and below; 1 ms is as expired as any other past instant.
    return max(1, math.ceil(seconds * 1000))


# KEYS[1]: the data-set marker; KEYS[2]: the claim. ARGV[1]: the claim's PXAT; ARGV[2]: `iat`.
# Returns 1 (claimed), 0 (already held), -1 (no marker: the data set is not established) or
# -2 (issued before the data set began: possibly used before Redis lost its records).
_CLAIM_SCRIPT: Final = """
local since = redis.call('GET', KEYS[1])
if not since then return -1 end
if tonumber(ARGV[2]) < tonumber(since) then return -2 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PXAT', ARGV[1]) then return 1 end
return 0
"""


class RedisReplayGuard:
    """Single-use keys (JWT `jti`s) shared by every instance, held until `expires_at`.

    Data loss. A Redis restarted without persistence (or flushed) forgets every claim, so a
    token used before would pass again. The guard keeps a marker key, `<prefix>epoch`,
    holding the Unix time from which this data set holds every claim; each claim checks it
    in the same script. When the marker is missing, the data set is new: the marker is
    written again (by whichever instance comes first) with the time the records began, and
    keys issued before it (`issued_at` earlier) are refused, as possible replays, until
    they expire. That time is the Redis server's start when it restarted (it held nothing
    before), or the moment of detection when the records vanished under a running server.
    """

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix
        self._marker = f"{prefix}epoch"
        self._script = client.register_script(_CLAIM_SCRIPT)
        self._run_id: str | None = None
        self._held: float | None = None

    async def establish(self) -> float:
        """Write the marker if it is missing; return the time from which claims are kept."""
        with _unavailable_on_redis_errors():
            info = await self._client.info("server")
            seconds, microseconds = await self._client.time()
            now = seconds + microseconds / 1_000_000
            run_id = str(info["run_id"])
            if run_id == self._run_id:
                since = now  # the records vanished under a server this instance knew
            else:
                since = float(math.floor(now - float(info["uptime_in_seconds"])))
            await self._client.set(self._marker, repr(since), nx=True)
            held = float(await self._client.get(self._marker) or since)
        self._run_id = run_id
        self._note(held)
        return held

    async def check_data_set(self) -> None:
        """Notice a loss of Redis's data, whichever instance re-established the marker.

        A missing marker is written again (`establish`); a marker other than the one this
        instance knew means another instance found the loss first. Either way this
        instance logs the loss once and counts it (`parley_redis_data_losses_total`).
        """
        with _unavailable_on_redis_errors():
            value = await self._client.get(self._marker)
        if value is None:
            await self.establish()
        else:
            self._note(float(value))

    @asynccontextmanager
    async def watching(self, *, interval: float = DATA_SET_CHECK_SECONDS) -> AsyncIterator[None]:
        """Check the data set every `interval` seconds while the context is open."""

        async def watch() -> None:
            while True:
                await asyncio.sleep(interval)
                with contextlib.suppress(Unavailable):  # an outage is /health's to report
                    await self.check_data_set()

        task = asyncio.create_task(watch())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _note(self, held: float) -> None:
        known, self._held = self._held, held
        if known is None or held == known:
            return
        metrics.count_redis_data_loss()
        log.warning(
            "Redis lost its data: rate-limit counts and the dashboard sign-in throttle "
            "started over, and JWTs with a jti issued before %s are refused as possible "
            "replays until they expire",
            datetime.fromtimestamp(held, UTC).isoformat(timespec="seconds"),
        )

    async def claim(self, key: str, *, expires_at: float, issued_at: float) -> bool:
        """Record `key` until `expires_at` (Unix seconds); False if held or possibly replayed.

        A key whose `expires_at` has already passed is not recorded. A key `issued_at` (Unix
        seconds) before the data set began is refused: it may have been used before the loss.
        """
        name = _redis_key(self._prefix, "replay", key)
        args: list[str | int] = [_unix_ms(expires_at), repr(float(issued_at))]
        with _unavailable_on_redis_errors():
            outcome = int(await self._script(keys=[self._marker, name], args=args))
        if outcome == -1:
            await self.establish()
            with _unavailable_on_redis_errors():
                outcome = int(await self._script(keys=[self._marker, name], args=args))
        return outcome == 1


# KEYS[1]: the bucket (hash of tokens and stamp). ARGV[1]: tokens per second; ARGV[2]: burst.
# Returns {allowed (0 or 1), milliseconds until a token is available}. Time comes from the
# server, so instances with skewed clocks share one bucket; a server clock that steps back
# refills nothing until it catches up. The key expires once the bucket would be full again.
_BUCKET_SCRIPT: Final = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(state[1])
local stamp = tonumber(state[2])
if tokens == nil or stamp == nil then
  tokens = burst
  stamp = now
end
if now > stamp then
  tokens = math.min(burst, tokens + (now - stamp) * rate)
  stamp = now
end
local allowed = 0
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = math.ceil((1 - tokens) / rate * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens),
           'stamp', string.format('%.6f', stamp))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, wait_ms}
"""


class RedisRateLimiter:
    """Token buckets shared by every instance: `rate_per_minute` sustained, `burst` at once.

    The script is sent by EVALSHA and loaded on NOSCRIPT (redis-py's registered script).
    """

    def __init__(
        self,
        rate_per_minute: float,
        burst: int,
        client: Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if not rate_per_minute > 0:
            raise ValueError("rate_per_minute must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self._rate = rate_per_minute / 60.0
        self._burst = burst
        self._prefix = prefix
        self._script = client.register_script(_BUCKET_SCRIPT)

    async def hit(self, key: str) -> RateDecision:
        """Take one token from the bucket of `key`; if none is left, say when one will be."""
        name = _redis_key(self._prefix, "rate", key)
        with _unavailable_on_redis_errors():
            reply = await self._script(keys=[name], args=[repr(self._rate), self._burst])
        allowed, wait_ms = (int(value) for value in reply)
        if allowed:
            return RateDecision(allowed=True)
        return RateDecision(allowed=False, retry_after=max(1, math.ceil(wait_ms / 1000)))


class RedisRevocations:
    """Revoked credential IDs shared by every instance until they would have expired."""

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    async def revoke(self, credential_id: str, *, expires_at: float) -> None:
        """Mark `credential_id` revoked until `expires_at`; a later revocation never shortens it.

        One MULTI: `SET NX PXAT` creates the key, `PEXPIREAT GT` extends an existing one.
        """
        name = _redis_key(self._prefix, "revoked", credential_id)
        at_ms = _unix_ms(expires_at)
        with _unavailable_on_redis_errors():
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.set(name, 1, nx=True, pxat=at_ms)
                pipe.pexpireat(name, at_ms, gt=True)
                await pipe.execute()

    async def is_revoked(self, credential_id: str) -> bool:
        """Tell whether `credential_id` is revoked now."""
        name = _redis_key(self._prefix, "revoked", credential_id)
        with _unavailable_on_redis_errors():
            return bool(await self._client.exists(name))


class RedisStoreHealth:
    """Redis answers a PING, or `/health` says that it does not."""

    UNREACHABLE = "Redis (PARLEY_REDIS_URL) does not answer: tokens cannot be checked."

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._probe = SharedProbe(self._ping)

    async def check(self) -> None:
        """Return when Redis answers PING; raise Unavailable naming Redis otherwise.

        Callers that ask while a PING runs share its answer; an earlier success is never
        trusted (`SharedProbe`).
        """
        await self._probe()

    async def _ping(self) -> None:
        try:
            with _unavailable_on_redis_errors():
                await self._client.ping()
        except Unavailable:
            raise Unavailable(self.UNREACHABLE) from None


class RedisThrottle:
    """At most one action per key per window, across every instance (`SET NX PX`)."""

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    async def try_acquire(self, key: str, *, window_seconds: float) -> bool:
        """Return True, and start a window of `window_seconds`, if no window of `key` is open."""
        if not window_seconds > 0:
            raise ValueError("window_seconds must be positive")
        name = _redis_key(self._prefix, "throttle", key)
        window_ms = max(1, math.ceil(window_seconds * 1000))
        with _unavailable_on_redis_errors():
            created = await self._client.set(name, 1, nx=True, px=window_ms)
        return bool(created)

    async def seconds_left(self, key: str) -> float:
        """Return how long the open window of `key` lasts yet (0 when none is open)."""
        name = _redis_key(self._prefix, "throttle", key)
        with _unavailable_on_redis_errors():
            left_ms = await self._client.pttl(name)  # -2: no key; -1: no expiry (not ours)
        return max(0, int(left_ms)) / 1000


class RedisChangeFeed:
    """The change feed of a fleet: a Redis pub/sub channel, `<prefix>changes`.

    Pub/sub keeps nothing: a message sent while an instance is not subscribed is lost to it.
    So the listener reports `None` ("anything may have been missed") each time it
    (re)subscribes, and resubscribes when the connection fails (0.1 s after the first
    failure, doubling up to 2 s while Redis stays away).
    """

    RESUBSCRIBE_SECONDS: Final = (0.1, 2.0)
    """The wait before resubscribing after a failure: doubling from the first to the second."""
    POLL_SECONDS: Final = 1.0

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._channel = f"{prefix}changes"

    async def publish(self, org_id: str) -> None:
        """Send the organization's ID on the channel; Unavailable when Redis does not answer."""
        with _unavailable_on_redis_errors():
            await self._client.publish(self._channel, org_id)

    async def listen(self, on_change: Callable[[str | None], None]) -> None:
        """Subscribe and deliver every message until cancelled, resubscribing after a failure."""
        first, longest = self.RESUBSCRIBE_SECONDS
        wait = first
        while True:
            try:
                async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self._channel)
                    wait = first
                    on_change(None)  # messages sent before this subscription are not delivered
                    while True:
                        message = await pubsub.get_message(timeout=self.POLL_SECONDS)
                        if message is not None and message.get("type") == "message":
                            data = message["data"]
                            on_change(data.decode() if isinstance(data, bytes) else str(data))
            except REDIS_ERRORS as exc:
                log.warning("change feed: Redis subscription lost (%s); resubscribing", exc)
            await asyncio.sleep(wait)
            wait = min(wait * 2, longest)


# KEYS: the groups' sorted sets (member -> lease expiry, server ms). ARGV[1]: the member;
# ARGV[2]: the lease (ms); ARGV[3..]: each group's cap (-1: none). Drops the expired members
# of every group, then holds the member in each unless a group that lacks it is full.
# Returns {1, added (0 or 1)} when held, {0, index of the full group} when refused.
_TAKE_SCRIPT: Final = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lease = tonumber(ARGV[2])
local held = 1
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if not redis.call('ZSCORE', key, ARGV[1]) then held = 0 end
end
if held == 0 then
  for i, key in ipairs(KEYS) do
    local cap = tonumber(ARGV[i + 2])
    if cap >= 0 and not redis.call('ZSCORE', key, ARGV[1])
        and redis.call('ZCARD', key) >= cap then
      return {0, i}
    end
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + lease, ARGV[1])
  if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, lease) end
end
return {1, 1 - held}
"""

# KEYS: groups; ARGV[1]: the lease (ms); ARGV[2..]: one member per key (a member of several
# groups appears once per group). Holds each `lease` ms from now.
_RENEW_SCRIPT: Final = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local lease = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + lease, ARGV[i + 1])
  if redis.call('PTTL', key) < lease then redis.call('PEXPIRE', key, lease) end
end
return 1
"""

# KEYS: groups. Returns how many members of each have a lease that has not run out.
_COUNT_SCRIPT: Final = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local counts = {}
for i, key in ipairs(KEYS) do
  counts[i] = redis.call('ZCOUNT', key, '(' .. now, '+inf')
end
return counts
"""


class RedisCappedLeases:
    """Capped groups of leased members shared by every instance: one sorted set per group,
    each member scored by its lease's expiry on the Redis server's clock.

    A take is one script (`_TAKE_SCRIPT`): the check of every cap and the adds happen with
    no other command in between, so of any number of concurrent takes on any instances no
    group ever holds more than its cap. A group's key expires a lease after its last change.
    """

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._prefix = prefix
        self._take = client.register_script(_TAKE_SCRIPT)
        self._renew = client.register_script(_RENEW_SCRIPT)
        self._count = client.register_script(_COUNT_SCRIPT)
        self._client = client

    def _key(self, group: str) -> str:
        return _redis_key(self._prefix, "leases", group)

    async def take(
        self, member: str, groups: Sequence[tuple[str, int | None]], *, lease_seconds: float
    ) -> LeaseDecision:
        """Hold `member` in every group unless one that lacks it is full (one script)."""
        keys = [self._key(group) for group, _ in groups]
        caps = [-1 if cap is None else cap for _, cap in groups]
        args: list[str | int] = [member, _lease_ms(lease_seconds), *caps]
        with _unavailable_on_redis_errors():
            held, detail = (int(value) for value in await self._take(keys=keys, args=args))
        if held:
            return LeaseDecision(held=True, added=bool(detail))
        return LeaseDecision(held=False, full=groups[detail - 1][0])

    async def renew(
        self, held: Sequence[tuple[str, Sequence[str]]], *, lease_seconds: float
    ) -> None:
        """Hold each member `lease_seconds` from now in its groups (one script)."""
        pairs = [(self._key(group), member) for member, groups in held for group in groups]
        if not pairs:
            return
        keys = [key for key, _ in pairs]
        args: list[str | int] = [_lease_ms(lease_seconds), *(member for _, member in pairs)]
        with _unavailable_on_redis_errors():
            await self._renew(keys=keys, args=args)

    async def release(self, member: str, groups: Sequence[str]) -> None:
        """Stop counting `member` in `groups` (one MULTI)."""
        with _unavailable_on_redis_errors():
            async with self._client.pipeline(transaction=True) as pipe:
                for group in groups:
                    pipe.zrem(self._key(group), member)
                await pipe.execute()

    async def count(self, groups: Sequence[str]) -> list[int]:
        """Return how many members each group holds now (one script)."""
        if not groups:
            return []
        with _unavailable_on_redis_errors():
            counts = await self._count(keys=[self._key(group) for group in groups])
        return [int(value) for value in counts]


def _lease_ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))
