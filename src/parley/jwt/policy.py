"""What an organization registered for its JWTs (API.md section 7, `PUT /v1/auth/jwt`).

These are plain values that the service layer builds from its stored configuration and hands to
the kernel: `IssuerPolicy` for the claim checks of steps 4 to 8, `KeySource` for step 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_MAX_LIFETIME_SECONDS: Final = 3600
"""Default bound on `exp - iat` (API.md section 7 step 8; spec section 5.4 rule 10)."""


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where an organization's verification keys come from: a JWKS URL or static keys.

    Exactly one of `jwks_url` and `static_keys` is given (API.md section 7). Static keys are
    public JWK objects, as `parley.jwt.import_static_key(...).jwk` returns them.
    """

    org_id: str
    jwks_url: str | None = None
    static_keys: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if (self.jwks_url is None) == (not self.static_keys):
            raise ValueError("give exactly one of jwks_url and static_keys")


@dataclass(frozen=True, slots=True)
class IssuerPolicy:
    """The rules an organization set for the tokens of one of its issuers."""

    audience: str
    """The registered audience that `aud` must name (step 5)."""
    keys: KeySource
    """The organization's keys (step 3)."""
    max_lifetime_seconds: int = DEFAULT_MAX_LIFETIME_SECONDS
    """Bound on `exp - iat` (step 8)."""
    require_jti: bool = False
    """When true, a token without `jti` fails step 4."""

    @property
    def org_id(self) -> str:
        """The organization that registered the issuer."""
        return self.keys.org_id
