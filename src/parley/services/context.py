"""What every use-case receives: the database, the clock and the shared stores.

`DatabaseContext` is the part the operator commands need (services/database_context.py opens
one without the JWT runtime or the stores); `Context`, built by the composition root, is a
`DatabaseContext` with everything else, so any service that takes the former takes it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from parley.clock import Clock
from parley.db.database import Database
from parley.services.credential_cache import CredentialCache
from parley.services.outbox_bell import OutboxBell

DEFAULT_PUBLIC_URL = "http://127.0.0.1:8000"
"""PARLEY_PUBLIC_URL's default (parley/config.py)."""

if TYPE_CHECKING:
    # Annotations only: the operator commands import this module without loading them.
    from parley.jwt import JwksFetcher, KeyCache
    from parley.outbound import AddressPolicy, OutboundClient
    from parley.sealing import SecretBox
    from parley.services.jwt_config import IssuerDirectory
    from parley.stores.base import RateLimiter, ReplayGuard, Revocations, StoreHealth


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
class Instance:
    """This process as the owner of live conversations (services/instances.py)."""

    id: str
    lease_seconds: float
    """Live conversations of an instance silent this long are ended by the others."""


@dataclass(frozen=True, slots=True)
class DatabaseContext:
    """The database and the clock: all that organizations, API keys and the audit trail use."""

    db: Database
    clock: Clock


@dataclass(frozen=True, slots=True)
class Context(DatabaseContext):
    """The dependencies of the services, built once by the composition root (app.py)."""

    jwt: JwtRuntime
    revocations: Revocations
    sign_in_limiter: RateLimiter
    """Failed dashboard sign-ins per client address (services/dashboard.py)."""
    store_health: StoreHealth
    """Whether the stores shared by the instances answer (services/health.py)."""
    instance: Instance
    secrets: SecretBox
    """Seals secrets stored in the database (the carrier's auth token, API.md section 13)."""
    outbound: OutboundClient
    """The one way out to the internet (parley/outbound), shared with the JWKS fetcher."""
    outbound_policy: AddressPolicy
    """Where webhook tools and webhooks may call (PARLEY_OUTBOUND_ALLOW_*)."""
    credential_cache: CredentialCache = field(default_factory=CredentialCache)
    """API keys and session tokens already seen (services/credential_cache.py)."""
    outbox_bell: OutboxBell = field(default_factory=OutboxBell)
    """Rung after a commit that wrote webhook deliveries (services/webhook_delivery.py)."""
    public_url: str = DEFAULT_PUBLIC_URL
    """The service's public URL (PARLEY_PUBLIC_URL, no trailing slash): carriers call it and
    sign their webhooks over it, whatever Host header a proxy passes on (API.md 13)."""
