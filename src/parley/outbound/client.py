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

No environment proxy sits between the check and the request, and no cookie is kept.

The pools are aiohttp's (its C HTTP parser: a webhook delivery costs the serving process about
a sixth of the CPU it cost through httpx, measured in docs/performance.md). aiohttp connects
through `_PinnedResolver`, which never resolves: it answers with the address this client
checked for the host name just before the request, and its own DNS cache is off. Connections
are kept alive per host name (aiohttp keys its pool by host name, port and TLS), so a
connection opened, and for https verified, for one host name never carries a request for
another; an idle one is closed after `KEEPALIVE_SECONDS`. A webhook's deliveries then cost no
new TCP and TLS handshake each. Tests may hand the client an httpx client with a
MockTransport instead (STYLE convention 5): each request then goes through it, to the checked
address with `Host` and SNI set by hand. The client logs nothing: a header or body may hold a
secret.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parley.outbound.errors import (
    OutboundFailed,
    OutboundRefused,
    OutboundTimeout,
    OutboundTooLarge,
)
from parley.outbound.policy import AddressPolicy

if TYPE_CHECKING:
    # Imported where used: the JWT kernel's customer-side tools never call out.
    import aiohttp
    import httpx

HostResolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings; injectable for tests."""

MAX_CONNECTIONS = 100
"""Connections open at once, all host names together (httpx's default limit)."""
MAX_PINNED = 1024
"""Host names whose checked address is remembered for the next connection."""
KEEPALIVE_SECONDS = 5.0
"""An idle kept-alive connection is closed after this long."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Resolve `host` with the event loop's getaddrinfo; return the addresses in its order.

    A literal address is its own answer (getaddrinfo would run in a thread to say so)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
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


class _PinnedResolver:
    """aiohttp's resolver: the address the client checked for a host name, never a DNS
    answer of its own (a second answer could point elsewhere: DNS rebinding)."""

    def __init__(self) -> None:
        self._pinned: OrderedDict[str, str] = OrderedDict()

    def pin(self, host: str, address: str) -> None:
        """Remember the checked address a new connection to `host` must use."""
        self._pinned[host] = address
        self._pinned.move_to_end(host)
        while len(self._pinned) > MAX_PINNED:
            self._pinned.popitem(last=False)

    async def resolve(
        self,
        host: str,
        port: int = 0,
        family: socket.AddressFamily = socket.AF_INET,  # noqa: ARG002 - aiohttp's signature
    ) -> list[dict[str, Any]]:
        address = self._pinned.get(host)
        if address is None:  # only a request this client checked connects
            raise OSError(f"no checked address for {host}")
        inet = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": inet,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self) -> None:
        return None


class OutboundClient:
    """Makes HTTP calls under an AddressPolicy and the caller's time and byte caps."""

    def __init__(
        self, http: httpx.AsyncClient | None = None, *, resolve: HostResolver = resolve_host
    ) -> None:
        """Send through aiohttp's pools (see the module doc), or through `http` when given
        (tests hand one a MockTransport, STYLE convention 5); follow no redirects."""
        self._given = http
        self._session: aiohttp.ClientSession | None = None
        self._resolver = _PinnedResolver()
        self._resolve = resolve

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        if self._given is not None:
            await self._given.aclose()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _pool(self) -> aiohttp.ClientSession:
        """The session whose connections are kept alive per host name (made on first use:
        it belongs to the running event loop)."""
        if self._session is None or self._session.closed:
            import aiohttp

            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    resolver=self._resolver,  # type: ignore[arg-type] # duck-typed resolver
                    use_dns_cache=False,
                    limit=MAX_CONNECTIONS,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                ),
                cookie_jar=aiohttp.DummyCookieJar(),  # one customer's cookie never reaches another
                auto_decompress=False,
                trust_env=False,
            )
        return self._session

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
        import aiohttp
        import httpx

        target = policy.checked_url(url)
        try:
            async with asyncio.timeout(timeout_s):
                address = await self._checked_address(target, policy)
                sent = _sent_headers(target, headers or {})
                if self._given is not None:
                    return await _send_given(
                        self._given,
                        method,
                        target,
                        address,
                        sent,
                        content,
                        timeout_s,
                        max_bytes,
                        policy,
                    )
                return await self._send(method, target, address, sent, content, max_bytes, policy)
        except TimeoutError:
            raise OutboundTimeout(f"{policy.subject} did not answer in time.") from None
        except httpx.TimeoutException:
            raise OutboundTimeout(f"{policy.subject} did not answer in time.") from None
        except (httpx.HTTPError, aiohttp.ClientError):
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
        max_bytes: int,
        policy: AddressPolicy,
    ) -> OutboundResponse:
        """Through aiohttp: the URL keeps its host name (Host, SNI and the certificate check
        follow it); a new connection goes to `address`, pinned for it."""
        import yarl

        self._resolver.pin(url.raw_host.decode("ascii"), address)
        async with self._pool().request(
            method,
            yarl.URL(str(url), encoded=True),
            headers=headers,
            data=content,
            allow_redirects=False,
        ) as response:
            _check_encoding(response.headers, max_bytes, policy)
            body = bytearray()
            async for chunk in response.content.iter_any():
                body += chunk
                if len(body) > max_bytes:
                    raise _too_large(max_bytes, policy)
            return OutboundResponse(
                status=response.status, headers=response.headers, body=bytes(body), url=str(url)
            )


async def _send_given(
    http: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    address: str,
    headers: Mapping[str, str],
    content: bytes | None,
    timeout_s: float,
    max_bytes: int,
    policy: AddressPolicy,
) -> OutboundResponse:
    """Through the httpx client given: to the address itself, `Host` and SNI by hand."""
    request = http.build_request(
        method,
        url.copy_with(host=address),
        headers=headers,
        content=content,
        extensions={"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {},
        timeout=timeout_s,
    )
    response = await http.send(request, stream=True, follow_redirects=False)
    try:
        _check_encoding(response.headers, max_bytes, policy)
        body = bytearray()
        async for chunk in response.aiter_bytes():  # identity encoding: the raw bytes
            body += chunk
            if len(body) > max_bytes:
                raise _too_large(max_bytes, policy)
    finally:
        await response.aclose()
    return OutboundResponse(
        status=response.status_code, headers=response.headers, body=bytes(body), url=str(url)
    )


def _sent_headers(url: httpx.URL, headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers, with `Host` the URL's name and no compression asked for."""
    sent = {
        name: value
        for name, value in headers.items()
        if name.lower() not in ("host", "accept-encoding", "content-length")
    }
    sent["Host"] = url.netloc.decode("ascii")  # the name, not the address
    sent["Accept-Encoding"] = "identity"
    return sent


def _unresolved(policy: AddressPolicy) -> str:
    return f"{policy.subject} names a host that could not be resolved."


def _too_large(max_bytes: int, policy: AddressPolicy) -> OutboundTooLarge:
    cap = f"{max_bytes // 1024} KiB" if max_bytes % 1024 == 0 else f"{max_bytes} bytes"
    return OutboundTooLarge(f"{policy.subject} answered with more than {cap}.")


def _check_encoding(headers: Mapping[str, str], max_bytes: int, policy: AddressPolicy) -> None:
    """Refuse a compressed answer, and one whose Content-Length is invalid or past the cap."""
    if headers.get("content-encoding", "identity").strip().lower() != "identity":
        raise OutboundFailed(f"{policy.subject} answered with a compressed body.")
    declared = headers.get("content-length", "0")
    if not (declared.isascii() and declared.isdigit() and len(declared) <= 12):
        raise OutboundFailed(f"{policy.subject} answered with an invalid Content-Length.")
    if int(declared) > max_bytes:
        raise _too_large(max_bytes, policy)
