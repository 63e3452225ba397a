"""What a client may hold of a `parley serve` process: time to send a request, and
connections (docs/reliability.md, "Slow clients and proxies"). api/http_protocol.py applies
them; `parley serve` sets them from `PARLEY_HTTP_*`, `PARLEY_MAX_CONNECTIONS`,
`PARLEY_MAX_CONNECTIONS_PER_CLIENT` and `PARLEY_TRUSTED_PROXIES`.

The per-client cap counts the socket's peer: a connection is refused before a header is
read, and `X-Forwarded-For` is the client's to write. A trusted proxy has no cap of its own
(docs/decisions.md, "Request limits and connection caps").
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How long a client may take to send a request, and how many connections are open:
    in all, and from one client address. `trusted_proxies` (addresses or networks) are
    exempt from the per-client cap: each of their connections carries any client."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 1000
    max_connections_per_client: int = 100
    trusted_proxies: tuple[str, ...] = ()

    def capped(self, host: str) -> bool:
        """Whether the per-client cap applies to connections from `host` (an IP address)."""
        return not _is_trusted(host, self.trusted_proxies)


_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def _networks(entries: tuple[str, ...]) -> tuple[_Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _is_trusted(host: str, entries: tuple[str, ...]) -> bool:
    if not entries:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in _networks(entries))
