"""Which URLs and addresses a call leaving the service may reach (STYLE convention 22).

Defaults, each relaxed only by the operator's switch named in the refusal:

- `https` only (`<switches>_HTTP=true` also allows `http`); no other scheme, ever;
- a host and no userinfo (`https://user:pw@…` would put a credential in every log on the way);
- every address the host resolves to must be public: no loopback, private, link-local,
  shared (CGNAT), reserved, multicast or unspecified address, their IPv4-mapped, 6to4 and
  NAT64 (64:ff9b::/96) forms included (`<switches>_PRIVATE_NETWORKS=true` allows them);
  `localhost` and names under `.localhost` (RFC 6761: always loopback) are refused as a
  literal loopback address is, before any resolution.

`static_refusal` applies what can be decided without resolving (creation-time checks, API.md
12: a scheme, userinfo, a literal private address, a localhost name); the client
(`OutboundClient`) checks the resolved addresses again at every call.
One policy implementation serves every caller: JWKS fetches use it with their own switches
(PARLEY_JWKS_ALLOW_*), tools and webhooks with PARLEY_OUTBOUND_ALLOW_*.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from parley.outbound.errors import OutboundRefused

if TYPE_CHECKING:
    import httpx  # imported where used: importing the policy must stay cheap

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


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


def literal_address(host: str) -> str | None:
    """The IP address `host` spells literally, legacy IPv4 forms (`127.1`, `0x7f.1`) included;
    None for a name."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return _legacy_ipv4(host)


def is_localhost_name(host: str) -> bool:
    """Tell whether `host` is `localhost` or a name under `.localhost` (RFC 6761 section
    6.3: always loopback), in any case, with or without the root's trailing dot."""
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def _legacy_ipv4(host: str) -> str | None:
    """`127.1`, `0x7f.1` and the other forms inet_aton (and so getaddrinfo) reads; else None."""
    if not host or any(c not in "0123456789abcdefxABCDEFX." for c in host):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:  # not an address in any form: a name
        return None


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """The operator's two switches, and how refusals name the URL and the switches."""

    allow_http: bool = False
    allow_private_networks: bool = False
    subject: str = "The URL"
    """How messages name the URL, e.g. "The JWKS URL"."""
    switches: str = "PARLEY_OUTBOUND_ALLOW"
    """The prefix of the operator's switches: `<switches>_HTTP`, `<switches>_PRIVATE_NETWORKS`."""

    @property
    def private_refusal(self) -> str:
        """The refusal of a non-public address, naming the switch that allows it."""
        return (
            f"{self.subject} must resolve to public addresses only (set "
            f"{self.switches}_PRIVATE_NETWORKS=true to allow private, loopback and link-local "
            "addresses, e.g. for local testing)."
        )

    def static_refusal(self, url: str) -> str | None:
        """Why `url` is refused without resolving it (bad scheme, userinfo, a literal
        non-public address), or None if only its resolved addresses are left to check."""
        try:
            self.checked_url(url)
        except OutboundRefused as refused:
            return refused.message
        return None

    def checked_url(self, url: str) -> httpx.URL:
        """Parse `url`; raise OutboundRefused for what `static_refusal` refuses."""
        import httpx

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError):  # UnicodeError is a ValueError
            raise OutboundRefused(f"{self.subject} is not a valid URL.") from None
        if parsed.scheme == "http" and not self.allow_http:
            raise OutboundRefused(
                f"{self.subject} must use https (set {self.switches}_HTTP=true to allow http, "
                "e.g. for local testing)."
            )
        if parsed.scheme not in ("https", "http"):
            if self.allow_http:
                raise OutboundRefused(f"{self.subject} must use https or http.")
            raise OutboundRefused(f"{self.subject} must use https.")
        if not parsed.host or parsed.userinfo:
            raise OutboundRefused(f"{self.subject} must name a host and no credentials.")
        literal = literal_address(parsed.host)
        if literal is not None and self.address_refusal([literal]):
            raise OutboundRefused(self.private_refusal)
        if is_localhost_name(parsed.host) and not self.allow_private_networks:
            raise OutboundRefused(self.private_refusal)
        return parsed

    def address_refusal(self, addresses: Iterable[str]) -> str | None:
        """Why these resolved addresses are refused (any non-public one), or None."""
        if self.allow_private_networks or all(map(is_public_address, addresses)):
            return None
        return self.private_refusal
