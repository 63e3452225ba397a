"""Redis stores: shared by every instance of distributed mode (API.md section 11).

Each operation is one atomic Redis command, transaction or script, so concurrent instances
agree: replay claims are `SET NX PXAT`, throttle windows `SET NX PX`, revocations expiring
keys, and rate limits a token bucket in a Lua script.

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

import hashlib
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from redis import exceptions as redis_exceptions
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from parley import metrics
from parley.errors import Unavailable
from parley.stores.base import RateDecision

__all__ = [
    "DEFAULT_PREFIX",
    "REDIS_ERRORS",
    "RedisRateLimiter",
    "RedisReplayGuard",
    "RedisRevocations",
    "RedisThrottle",
    "connect_redis",
]

DEFAULT_PREFIX: Final = "parley:"

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


class RedisReplayGuard:
    """Single-use keys (JWT `jti`s) shared by every instance, held until `expires_at`."""

    def __init__(self, client: Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix

    async def claim(self, key: str, *, expires_at: float) -> bool:
        """Record `key` until `expires_at` (Unix seconds) with `SET NX PXAT`; False if held.

        A key whose `expires_at` has already passed is not recorded.
        """
        name = _redis_key(self._prefix, "replay", key)
        with _unavailable_on_redis_errors():
            created = await self._client.set(name, 1, nx=True, pxat=_unix_ms(expires_at))
        return bool(created)


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
