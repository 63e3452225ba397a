"""Fetching an organization's JWKS over HTTP, with the limits of API.md section 7.

Defaults and limits, all enforced here or by the outbound client it calls through
(parley.outbound: the one way out, with one address policy, STYLE convention 22):

- `https` only, unless `allow_http` (PARLEY_JWKS_ALLOW_HTTP);
- the host name is resolved and every address must be public (no loopback, private,
  link-local, shared, reserved, multicast or unspecified address, IPv4-mapped and NAT64
  forms included) unless `allow_private_networks` (PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS). The
  request then goes to the checked address itself (TLS still verifies the certificate for the
  host name through SNI), so a second DNS answer cannot point it elsewhere (DNS rebinding);
- 3 s for the whole fetch (resolution, connection, headers and body);
- at most 256 KiB of body, read as a stream and abandoned past the cap; no compression;
- no redirect is followed: only a 200 answer is a JWKS;
- sent with `User-Agent: Parley-JWKS`;
- `Cache-Control: max-age` gives the lifetime, clamped to 5 min .. 24 h (default 10 min;
  `no-cache`/`no-store` count as the minimum).

Every failure is a `JwksFetchError` whose message says what went wrong without echoing the
URL, the addresses or the body. The client is injected (STYLE convention 5): the process's
`OutboundClient`, or an `httpx.AsyncClient` (tests: a MockTransport) to build one on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from parley import metrics
from parley.jwt._codec import MalformedError, json_object
from parley.jwt.errors import JwksFetchError
from parley.outbound import (
    AddressPolicy,
    HostResolver,
    OutboundClient,
    OutboundError,
    resolve_host,
)

if TYPE_CHECKING:
    import httpx  # imported where used: the customer-side tools never fetch

TIMEOUT_SECONDS: Final = 3.0
MAX_BODY_BYTES: Final = 256 * 1024
DEFAULT_MAX_AGE: Final = 600
MIN_MAX_AGE: Final = 300
MAX_MAX_AGE: Final = 86_400

SWITCHES: Final = "PARLEY_JWKS_ALLOW"
USER_AGENT: Final = "Parley-JWKS"


@dataclass(frozen=True, slots=True)
class FetchedJwks:
    """A fetched JWKS document and how long it may be cached."""

    document: dict[str, Any]
    max_age_seconds: int


def parse_max_age(cache_control: str | None) -> int:
    """Return the cache lifetime in seconds from a Cache-Control value, clamped (section 7)."""
    if not cache_control:
        return DEFAULT_MAX_AGE
    for directive in cache_control.split(","):
        name, _, value = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-cache", "no-store"):
            return MIN_MAX_AGE
        if name == "max-age":
            value = value.strip().strip('"')
            if not value.isdigit() or not value.isascii() or len(value) > 12:
                return DEFAULT_MAX_AGE
            return min(max(int(value), MIN_MAX_AGE), MAX_MAX_AGE)
    return DEFAULT_MAX_AGE


class JwksFetcher:
    """Fetches JWKS documents under the limits above; one instance serves every organization."""

    def __init__(
        self,
        client: OutboundClient | httpx.AsyncClient,
        *,
        allow_http: bool = False,
        allow_private_networks: bool = False,
        resolve: HostResolver | None = None,
        timeout_seconds: float = TIMEOUT_SECONDS,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        """Fetch through `client`; an httpx client is wrapped in an OutboundClient that
        resolves with `resolve` (default: getaddrinfo)."""
        if isinstance(client, OutboundClient):
            if resolve is not None:
                raise ValueError("give the OutboundClient its resolver")
            self._client = client
        else:
            self._client = OutboundClient(client, resolve=resolve or resolve_host)
        self._policy = AddressPolicy(
            allow_http=allow_http,
            allow_private_networks=allow_private_networks,
            subject="The JWKS URL",
            switches=SWITCHES,
        )
        self._timeout = timeout_seconds
        self._max_bytes = max_body_bytes

    @property
    def policy(self) -> AddressPolicy:
        """The address policy of JWKS URLs (PARLEY_JWKS_ALLOW_*)."""
        return self._policy

    async def fetch(self, url: str) -> FetchedJwks:
        """Fetch and parse the JWKS at `url`; raise JwksFetchError with a safe message."""
        try:
            fetched = await self._fetch(url)
        except JwksFetchError:
            metrics.count_jwks_fetch(ok=False)
            raise
        metrics.count_jwks_fetch(ok=True)
        return fetched

    async def _fetch(self, url: str) -> FetchedJwks:
        try:
            response = await self._client.request(
                "GET",
                url,
                policy=self._policy,
                headers={
                    "Accept": "application/jwk-set+json, application/json",
                    "User-Agent": USER_AGENT,
                },
                timeout_s=self._timeout,
                max_bytes=self._max_bytes,
            )
        except OutboundError as error:
            raise JwksFetchError(error.message) from None
        if response.is_redirect:
            raise JwksFetchError("The JWKS URL redirected; redirects are not followed.")
        if response.status != 200:
            raise JwksFetchError(f"The JWKS URL answered HTTP {response.status}.")
        try:
            document = json_object(response.body)
        except MalformedError:
            raise JwksFetchError("The JWKS URL did not return a JSON object.") from None
        if not isinstance(document.get("keys"), list):
            raise JwksFetchError('The JWKS document has no "keys" array.')
        max_age = parse_max_age(response.headers.get("cache-control"))
        return FetchedJwks(document=document, max_age_seconds=max_age)
