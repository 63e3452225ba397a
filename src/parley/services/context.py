"""What every use-case receives: the database, the clock and the shared stores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from parley.clock import Clock
from parley.db.database import Database
from parley.jwt import JwksFetcher, KeyCache
from parley.stores.base import RateLimiter, ReplayGuard, Revocations

if TYPE_CHECKING:
    from parley.services.jwt_config import IssuerDirectory


@dataclass(frozen=True, slots=True)
class JwtRuntime:
    """The JWT machinery of one instance (API.md section 7)."""

    fetcher: JwksFetcher
    key_cache: KeyCache
    issuers: IssuerDirectory
    rate_limiter: RateLimiter
    replay_guard: ReplayGuard
    default_audience: str


@dataclass(frozen=True, slots=True)
class Context:
    """The dependencies of the services, built once by the composition root (app.py)."""

    db: Database
    clock: Clock
    jwt: JwtRuntime
    revocations: Revocations
    sign_in_limiter: RateLimiter
    """Failed dashboard sign-ins per client address (services/dashboard.py)."""
