"""Fetching an organization's JWKS over HTTP, with the limits of API.md section 7.

Defaults and limits, all enforced here:

- `https` only, unless `allow_http` (PARLEY_JWKS_ALLOW_HTTP);
- the host name is resolved here and every address must be public (no loopback, private,
  link-local, shared, reserved, multicast or unspecified address, IPv4-mapped and NAT64
  forms included) unless `allow_private_networks` (PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS). The
  request then goes to the checked address itself (TLS still verifies the certificate for the
  host name through SNI), so a second DNS answer cannot point it elsewhere (DNS rebinding);
- 3 s for the whole fetch (resolution, connection, headers and body);
- at most 256 KiB of body, read as a stream and abandoned past the cap; no compression;
- no redirect is followed: only a 200 answer is a JWKS;
- `Cache-Control: max-age` gives the lifetime, clamped to 5 min .. 24 h (default 10 min;
  `no-cache`/`no-store` count as the minimum).

Every failure is a `JwksFetchError` whose message says what went wrong without echoing the
URL, the addresses or the body. The `httpx.AsyncClient` is injected (STYLE convention 5); give
it `trust_env=False` so no environment proxy sits between the address check and the request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from parley import metrics
from parley.jwt._codec import MalformedError, json_object
from parley.jwt.errors import JwksFetchError

if TYPE_CHECKING:
    import httpx  # imported where used: the customer-side tools never fetch

TIMEOUT_SECONDS: Final = 3.0
MAX_BODY_BYTES: Final = 256 * 1024
DEFAULT_MAX_AGE: Final = 600
MIN_MAX_AGE: Final = 300
MAX_MAX_AGE: Final = 86_400

HTTPS_REQUIRED: Final = (
    "The JWKS URL must use https "
    "(set PARLEY_JWKS_ALLOW_HTTP=true to allow http, e.g. for local testing)."
)
HTTPS_OR_HTTP_REQUIRED: Final = "The JWKS URL must use https or http."
PUBLIC_ADDRESSES_REQUIRED: Final = (
    "The JWKS host must resolve to public addresses only "
    "(set PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS=true to allow private, loopback and link-local "
    "addresses, e.g. for local testing)."
)
"""Refusals name the operator's switch: a developer testing on localhost needs both."""

HostResolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings; injectable for tests."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class FetchedJwks:
    """A fetched JWKS document and how long it may be cached."""

    document: dict[str, Any]
    max_age_seconds: int


async def resolve_host(host: str, port: int) -> list[str]:
    """Resolve `host` with the event loop's getaddrinfo; return the addresses in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


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


def is_public_address(address: str) -> bool:
    """Tell whether `address` is a globally routable unicast address (RFC 6890 registries)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            return is_public_address(str(embedded))
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


class JwksFetcher:
    """Fetches JWKS documents under the limits above; one instance serves every organization."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        allow_http: bool = False,
        allow_private_networks: bool = False,
        resolve: HostResolver = resolve_host,
        timeout_seconds: float = TIMEOUT_SECONDS,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._client = client
        self._allow_http = allow_http
        self._allow_private = allow_private_networks
        self._resolve = resolve
        self._timeout = timeout_seconds
        self._max_bytes = max_body_bytes

    def check_url(self, url: str) -> httpx.URL:
        """Refuse a URL that is not absolute http(s) with a host, or http when not allowed."""
        import httpx

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError):  # UnicodeError is a ValueError
            raise JwksFetchError("The JWKS URL is not a valid URL.") from None
        if parsed.scheme == "http" and not self._allow_http:
            raise JwksFetchError(HTTPS_REQUIRED)
        if parsed.scheme not in ("https", "http"):
            raise JwksFetchError(HTTPS_OR_HTTP_REQUIRED if self._allow_http else HTTPS_REQUIRED)
        if not parsed.host or parsed.userinfo:
            raise JwksFetchError("The JWKS URL must name a host and no credentials.")
        return parsed

    async def fetch(self, url: str) -> FetchedJwks:
        """Fetch and parse the JWKS at `url`; raise JwksFetchError with a safe message."""
        try:
            fetched = await self._fetch_safely(url)
        except JwksFetchError:
            metrics.count_jwks_fetch(ok=False)
            raise
        metrics.count_jwks_fetch(ok=True)
        return fetched

    async def _fetch_safely(self, url: str) -> FetchedJwks:
        import httpx

        target = self.check_url(url)
        try:
            async with asyncio.timeout(self._timeout):
                return await self._fetch(target)
        except TimeoutError:
            raise JwksFetchError("The JWKS URL did not answer in time.") from None
        except httpx.HTTPError:
            raise JwksFetchError("The JWKS URL could not be reached.") from None
        except OSError:
            raise JwksFetchError("The JWKS host name could not be resolved.") from None

    async def _address_of(self, url: httpx.URL) -> str:
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await self._resolve(url.raw_host.decode("ascii"), port)
        if not addresses:
            raise JwksFetchError("The JWKS host name could not be resolved.")
        if not self._allow_private and not all(map(is_public_address, addresses)):
            raise JwksFetchError(PUBLIC_ADDRESSES_REQUIRED)
        return addresses[0]

    async def _fetch(self, url: httpx.URL) -> FetchedJwks:
        address = await self._address_of(url)
        request = self._client.build_request(
            "GET",
            url.copy_with(host=address),
            headers={
                "Host": url.netloc.decode("ascii"),
                "Accept": "application/jwk-set+json, application/json",
                "Accept-Encoding": "identity",
            },
            extensions={"sni_hostname": url.raw_host.decode("ascii")},
            timeout=self._timeout,
        )
        response = await self._client.send(request, stream=True, follow_redirects=False)
        try:
            body = await self._read_body(response)
        finally:
            await response.aclose()
        try:
            document = json_object(body)
        except MalformedError:
            raise JwksFetchError("The JWKS URL did not return a JSON object.") from None
        if not isinstance(document.get("keys"), list):
            raise JwksFetchError('The JWKS document has no "keys" array.')
        max_age = parse_max_age(response.headers.get("cache-control"))
        return FetchedJwks(document=document, max_age_seconds=max_age)

    async def _read_body(self, response: httpx.Response) -> bytes:
        if response.is_redirect:
            raise JwksFetchError("The JWKS URL redirected; redirects are not followed.")
        if response.status_code != 200:
            raise JwksFetchError(f"The JWKS URL answered HTTP {response.status_code}.")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            raise JwksFetchError("The JWKS URL answered with a compressed body.")
        too_large = JwksFetchError(f"The JWKS is larger than {self._max_bytes // 1024} KiB.")
        declared = response.headers.get("content-length", "0")
        if not (declared.isascii() and declared.isdigit() and len(declared) <= 12):
            raise JwksFetchError("The JWKS URL answered with an invalid Content-Length.")
        if int(declared) > self._max_bytes:
            raise too_large
        body = bytearray()
        async for chunk in response.aiter_bytes():  # identity encoding: the raw bytes
            body += chunk
            if len(body) > self._max_bytes:
                raise too_large
        return bytes(body)
