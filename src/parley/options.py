"""From the operator's Settings to the plain values the services need.

Shared by the composition root (`parley.app`) and the operator commands (`parley.cli`), which
open a services context without loading the HTTP layer.
"""

from __future__ import annotations

from parley.config import Settings
from parley.services.runtime import RuntimeOptions


def runtime_options(settings: Settings) -> RuntimeOptions:
    """Hand the services the plain values they need from the configuration."""
    return RuntimeOptions(
        database_url=settings.database_url,
        redis_url=settings.redis_url,
        default_audience=settings.public_host,
        jwks_allow_http=settings.jwks_allow_http,
        jwks_allow_private_networks=settings.jwks_allow_private_networks,
        jwt_max_lifetime_seconds=settings.jwt_max_lifetime_seconds,
        jwt_rate_per_minute=settings.jwt_rate_per_minute,
        jwt_rate_burst=settings.jwt_rate_burst,
    )
