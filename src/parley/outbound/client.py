"""The one client for every call leaving the service: JWKS fetches, webhook tools, webhooks.

Each call, in order (STYLE convention 22; stripe/smokescreen is the model):

1. the URL passes the caller's `AddressPolicy` (scheme, no userinfo, no literal private
   address);
2. the host name is resolved here, and every address must pass the policy;
3. the request goes to the first checked address itself, with `Host` (and, for https, the
   TLS SNI name and certificate check) for the host name, so a second DNS answer cannot
   send it elsewhere (DNS rebinding);
4. no redirect is followed: a 3xx is returned to the caller as any other answer;
5. one time cap covers resolution, connection, headers and body; the body is read raw as a
   stream and abandoned past the byte cap; a compressed answer is refused (it was not
   asked for, and its size on the wire says nothing of its size unpacked).

No environment proxy (`trust_env=False`) sits between the check and the request.
Connections are kept alive, but each host name (with its scheme and port) has a pool of its
own: a connection to an address, opened (and, for https, verified) for one host name, never
carries a request for another. At most `MAX_POOLS` host names keep a pool (the least
recently used one is closed); an idle connection is closed after `KEEPALIVE_SECONDS`. A
webhook's deliveries then cost no new TCP and TLS handshake each. The client logs nothing:
a header or body may hold a secret.
"""

from __future__ import annotations

import asyncio
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from parley.outbound.errors import (
    OutboundFailed,
    OutboundRefused,
    OutboundTimeout,
    OutboundTooLarge,
)
from parley.outbound.policy import AddressPolicy

if TYPE_CHECKING:
    import httpx  # imported where used: the JWT kernel's customer-side tools never call out

HostResolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings; injectable for tests."""

MAX_POOLS = 64
"""Host names that keep idle connections at once."""
KEEPALIVE_SECONDS = 5.0
"""An idle kept-alive connection is closed after this long."""
KEEPALIVE_PER_HOST = 8


async def resolve_host(host: str, port: int) -> list[str]:
    """Resolve `host` with the event loop's getaddrinfo; return the addresses in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class OutboundResponse:
    """An answer read within the caps: status, headers (case-insensitive), the whole body."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str
    """The URL as called (the host name, not the address connected to)."""

    @property
    def is_redirect(self) -> bool:
        """True for a 3xx answer with a Location (never followed)."""
        return 300 <= self.status < 400 and "location" in self.headers


class OutboundClient:
    """Makes HTTP calls under an AddressPolicy and the caller's time and byte caps."""

    def __init__(
        self, http: httpx.AsyncClient | None = None, *, resolve: HostResolver = resolve_host
    ) -> None:
        """Use `http` for every call (tests hand one a MockTransport, STYLE convention 5),
        else one pool per host name (see the module doc), trusting no proxy settings and
        following no redirects."""
        self._given = http
        self._pools: OrderedDict[str, httpx.AsyncClient] = OrderedDict()
        self._closing: set[asyncio.Future[None]] = set()
        self._resolve = resolve

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        if self._given is not None:
            await self._given.aclose()
        pools, self._pools = list(self._pools.values()), OrderedDict()
        for pool in pools:
            await pool.aclose()

    def _pool(self, url: httpx.URL) -> httpx.AsyncClient:
        """The client whose connections serve this host name only."""
        if self._given is not None:
            return self._given
        import httpx

        key = f"{url.scheme}://{url.raw_host.decode('ascii')}:{url.port}"
        pool = self._pools.get(key)
        if pool is not None:
            self._pools.move_to_end(key)
            return pool
        if len(self._pools) >= MAX_POOLS:
            _, oldest = self._pools.popitem(last=False)
            # Closed in the background: a request still on it finishes or fails on its own.
            task = asyncio.ensure_future(oldest.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        pool = self._pools[key] = httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            limits=httpx.Limits(
                max_keepalive_connections=KEEPALIVE_PER_HOST, keepalive_expiry=KEEPALIVE_SECONDS
            ),
        )
        return pool

    async def request(
        self,
        method: str,
        url: str,
        *,
        policy: AddressPolicy,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
        timeout_s: float,
        max_bytes: int,
    ) -> OutboundResponse:
        """Send one request and read its answer within `timeout_s` and `max_bytes`.

        Raises OutboundRefused (nothing was sent), OutboundTimeout, OutboundTooLarge or
        OutboundFailed; never retries.
        """
        import httpx

        target = policy.checked_url(url)
        try:
            async with asyncio.timeout(timeout_s):
                address = await self._checked_address(target, policy)
                return await self._send(
                    method, target, address, headers or {}, content, timeout_s, max_bytes, policy
                )
        except TimeoutError:
            raise OutboundTimeout(f"{policy.subject} did not answer in time.") from None
        except httpx.TimeoutException:
            raise OutboundTimeout(f"{policy.subject} did not answer in time.") from None
        except httpx.HTTPError:
            raise OutboundFailed(f"{policy.subject} could not be reached.") from None
        except OSError:  # socket.gaierror and friends, from the resolver
            raise OutboundFailed(_unresolved(policy)) from None
        except ValueError:  # e.g. a header value that is not ASCII
            raise OutboundFailed(
                f"{policy.subject} could not be called: a header is invalid."
            ) from None

    async def _checked_address(self, url: httpx.URL, policy: AddressPolicy) -> str:
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = list(await self._resolve(url.raw_host.decode("ascii"), port))
        if not addresses:
            raise OutboundFailed(_unresolved(policy))
        if refusal := policy.address_refusal(addresses):
            raise OutboundRefused(refusal)
        return addresses[0]

    async def _send(
        self,
        method: str,
        url: httpx.URL,
        address: str,
        headers: Mapping[str, str],
        content: bytes | None,
        timeout_s: float,
        max_bytes: int,
        policy: AddressPolicy,
    ) -> OutboundResponse:
        host = url.raw_host.decode("ascii")
        sent_headers = {
            name: value
            for name, value in headers.items()
            if name.lower() not in ("host", "accept-encoding", "content-length")
        }
        sent_headers["Host"] = url.netloc.decode("ascii")  # the name, not the address
        sent_headers["Accept-Encoding"] = "identity"
        http = self._pool(url)
        request = http.build_request(
            method,
            url.copy_with(host=address),
            headers=sent_headers,
            content=content,
            extensions={"sni_hostname": host} if url.scheme == "https" else {},
            timeout=timeout_s,
        )
        response = await http.send(request, stream=True, follow_redirects=False)
        try:
            body = await _read_capped(response, max_bytes, policy)
        finally:
            await response.aclose()
        return OutboundResponse(
            status=response.status_code, headers=response.headers, body=body, url=str(url)
        )


def _unresolved(policy: AddressPolicy) -> str:
    return f"{policy.subject} names a host that could not be resolved."


async def _read_capped(response: httpx.Response, max_bytes: int, policy: AddressPolicy) -> bytes:
    """Read the body, refusing a compressed one and stopping past `max_bytes`."""
    if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
        raise OutboundFailed(f"{policy.subject} answered with a compressed body.")
    cap = f"{max_bytes // 1024} KiB" if max_bytes % 1024 == 0 else f"{max_bytes} bytes"
    too_large = OutboundTooLarge(f"{policy.subject} answered with more than {cap}.")
    declared = response.headers.get("content-length", "0")
    if not (declared.isascii() and declared.isdigit() and len(declared) <= 12):
        raise OutboundFailed(f"{policy.subject} answered with an invalid Content-Length.")
    if int(declared) > max_bytes:
        raise too_large
    body = bytearray()
    async for chunk in response.aiter_bytes():  # identity encoding: the raw bytes
        body += chunk
        if len(body) > max_bytes:
            raise too_large
    return bytes(body)
