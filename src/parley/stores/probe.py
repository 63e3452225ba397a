"""Check, before serving, that the configured Redis answers, and say why not.

Parley refuses to start when `PARLEY_REDIS_URL` is set and Redis does not answer: every JWT
and session-token check needs it, so a service that started anyway would refuse them all.
"""

from __future__ import annotations

from urllib.parse import urlsplit

TIMEOUT_SECONDS = 3.0


class RedisProbeFailed(Exception):
    """The Redis named by the configuration cannot be used; the message says why."""


async def probe_redis(url: str, *, wait_seconds: float = TIMEOUT_SECONDS) -> None:
    """Send one PING to the Redis at `url`, or raise RedisProbeFailed with the reason."""
    from redis import exceptions
    from redis.asyncio import Redis

    parts = urlsplit(url)
    where = f"Redis at {parts.hostname}:{parts.port or 6379}" if parts.hostname else "Redis"
    client = Redis.from_url(url, socket_connect_timeout=wait_seconds, socket_timeout=wait_seconds)
    try:
        await client.ping()
    except exceptions.AuthenticationError as error:
        raise RedisProbeFailed(f"{where} refused the credentials") from error
    except exceptions.TimeoutError as error:
        raise RedisProbeFailed(f"no answer from {where} within {wait_seconds:g} s") from error
    except exceptions.ConnectionError as error:
        raise RedisProbeFailed(f"cannot connect to {where} ({_reason(error)})") from error
    except exceptions.ResponseError as error:
        raise RedisProbeFailed(f"{where} answered an error: {error}") from error
    except exceptions.RedisError as error:
        raise RedisProbeFailed(f"{where} failed: {type(error).__name__}") from error
    finally:
        await client.aclose()


def _reason(error: Exception) -> str:
    text = str(error)
    if "connection refused" in text.lower() or "connect call failed" in text.lower():
        return "connection refused: is Redis running there?"
    for known in ("Name or service not known", "No route to host"):
        if known.lower() in text.lower():
            return known.lower()
    return text.split(". ")[-1].rstrip(".").lower() or type(error).__name__
