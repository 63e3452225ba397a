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
   asked for, and its size on the wire says nothing of its size unpacked). A caller that
   wants the status only (`ignore_body=True`, webhook deliveries) gets it whatever the body:
   what of it comes within the cap and a short drain is read and dropped (so the connection
   can be kept), the rest abandoned.

No environment proxy sits between the check and the request, and no cookie is kept.

The pools are aiohttp's (its C HTTP parser: a webhook delivery costs the serving process about
a sixth of the CPU it cost through httpx, measured in docs/performance.md). aiohttp is handed
the URL with the checked address in place of the host name, and the name as `server_hostname`
(SNI and the certificate check) and `Host`; it never resolves (`_NoResolver`). Its pool keys a
connection by address, port, TLS and that name, and each `AddressPolicy` has a pool of its
own, so a kept-alive connection carries only requests of the same policy whose checked address
is its peer and whose host name it was opened (and, for https, verified) for: a JWKS fetch
allowed to reach loopback never leaves a connection a tool call could reuse once the name
resolves elsewhere. An idle connection is closed after `KEEPALIVE_SECONDS`. A webhook's
deliveries then cost no new TCP and TLS handshake each. Tests may hand the client an httpx
client with a MockTransport instead (STYLE convention 5): each request then goes through it,
to the checked address with `Host` and SNI set by hand. Every request carries a `User-Agent`
(the caller's, else `DEFAULT_USER_AGENT`). The client logs nothing: a header or body may hold
a secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
"""Connections open at once per policy, all addresses together (httpx's default limit)."""
KEEPALIVE_SECONDS = 5.0
"""An idle kept-alive connection is closed after this long."""
DRAIN_SECONDS = 1.0
"""How long a status-only call waits for the rest of a body it drops (`ignore_body`)."""
FRAMING_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-connection",
    }
)
"""Headers that frame or route a message (lower-case): set by this client, never a caller's."""
DEFAULT_USER_AGENT = "Parley"
"""The `User-Agent` of a call whose caller names none (never the HTTP library's)."""


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


class _NoResolver:
    """aiohttp's resolver, never asked: every URL it is handed names the checked address
    itself. Asked anyway, it refuses, so no DNS answer of aiohttp's own is ever used."""

    async def resolve(
        self,
        host: str,
        port: int = 0,  # noqa: ARG002 - aiohttp's signature
        family: socket.AddressFamily = socket.AF_INET,  # noqa: ARG002 - aiohttp's signature
    ) -> list[dict[str, Any]]:
        raise OSError(f"no checked address for {host}")

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
        self._sessions: dict[AddressPolicy, aiohttp.ClientSession] = {}
        self._resolve = resolve

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        if self._given is not None:
            await self._given.aclose()
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()

    def _pool(self, policy: AddressPolicy) -> aiohttp.ClientSession:
        """The session of `policy`'s calls, whose connections are kept alive per address,
        port, TLS and host name (made on first use: it belongs to the running event loop)."""
        session = self._sessions.get(policy)
        if session is None or session.closed:
            import aiohttp

            session = self._sessions[policy] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    resolver=_NoResolver(),  # type: ignore[arg-type] # duck-typed resolver
                    use_dns_cache=False,
                    limit=MAX_CONNECTIONS,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                ),
                cookie_jar=aiohttp.DummyCookieJar(),  # one customer's cookie never reaches another
                auto_decompress=False,
                trust_env=False,
            )
        return session

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
        ignore_body: bool = False,
    ) -> OutboundResponse:
        """Send one request and read its answer within `timeout_s` and `max_bytes`.

        With `ignore_body`, the answer's body is dropped unread past the cap or a short
        drain, whatever its size or encoding, and the response's `body` is empty.
        Raises OutboundRefused (nothing was sent), OutboundTimeout, OutboundTooLarge or
        OutboundFailed; never retries.
        """
        import aiohttp
        import httpx

        target = policy.checked_url(url)
        try:
            async with asyncio.timeout(timeout_s) as scope:
                address = await self._checked_address(target, policy)
                sent = _sent_headers(target, headers or {})
                caps = _Caps(max_bytes, ignore_body, scope.when())
                if self._given is not None:
                    return await _send_given(
                        self._given, method, target, address, sent, content, timeout_s, caps, policy
                    )
                return await self._send(method, target, address, sent, content, caps, policy)
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
        caps: _Caps,
        policy: AddressPolicy,
    ) -> OutboundResponse:
        """Through aiohttp, to `address` itself: the host name goes as `server_hostname`
        (SNI and the certificate check) and `Host`, and is part of the pool's key."""
        import yarl

        async with self._pool(policy).request(
            method,
            yarl.URL(str(url.copy_with(host=address)), encoded=True),
            headers=headers,
            data=content,
            allow_redirects=False,
            server_hostname=url.raw_host.decode("ascii"),
        ) as response:
            if caps.ignore_body:
                await _drain(response.content.iter_any(), caps)
                return OutboundResponse(
                    status=response.status, headers=response.headers, body=b"", url=str(url)
                )
            _check_encoding(response.headers, caps.max_bytes, policy)
            body = bytearray()
            async for chunk in response.content.iter_any():
                body += chunk
                if len(body) > caps.max_bytes:
                    raise _too_large(caps.max_bytes, policy)
            return OutboundResponse(
                status=response.status, headers=response.headers, body=bytes(body), url=str(url)
            )


@dataclass(frozen=True, slots=True)
class _Caps:
    """How much of an answer is read, and until when."""

    max_bytes: int
    ignore_body: bool
    deadline: float | None
    """The event loop time the whole call must end by."""


async def _drain(chunks: AsyncIterator[bytes], caps: _Caps) -> None:
    """Read and drop a body within `max_bytes` and `DRAIN_SECONDS` (ending before the
    call's deadline); stop quietly past either, or at a broken body: only the status counts."""
    loop = asyncio.get_running_loop()
    budget = DRAIN_SECONDS
    if caps.deadline is not None:
        budget = min(budget, caps.deadline - loop.time() - 0.05)
    if budget <= 0:
        return
    read = 0
    with contextlib.suppress(TimeoutError, OSError, ValueError, _client_errors()):
        async with asyncio.timeout(budget):
            async for chunk in chunks:
                read += len(chunk)
                if read > caps.max_bytes:
                    return


def _client_errors() -> type[Exception]:
    import aiohttp

    return aiohttp.ClientError


async def _send_given(
    http: httpx.AsyncClient,
    method: str,
    url: httpx.URL,
    address: str,
    headers: Mapping[str, str],
    content: bytes | None,
    timeout_s: float,
    caps: _Caps,
    policy: AddressPolicy,
) -> OutboundResponse:
    """Through the httpx client given: to the address itself, `Host` and SNI by hand."""
    import httpx

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
        body = bytearray()
        if caps.ignore_body:
            with contextlib.suppress(httpx.HTTPError):
                await _drain(response.aiter_raw(), caps)
        else:
            _check_encoding(response.headers, caps.max_bytes, policy)
            async for chunk in response.aiter_bytes():  # identity encoding: the raw bytes
                body += chunk
                if len(body) > caps.max_bytes:
                    raise _too_large(caps.max_bytes, policy)
    finally:
        await response.aclose()
    return OutboundResponse(
        status=response.status_code, headers=response.headers, body=bytes(body), url=str(url)
    )


def _sent_headers(url: httpx.URL, headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers but framing ones, with `Host` the URL's name and no compression
    asked for."""
    sent = {
        name: value
        for name, value in headers.items()
        if name.lower() not in FRAMING_HEADERS and name.lower() != "accept-encoding"
    }
    sent["Host"] = url.netloc.decode("ascii")  # the name, not the address
    sent["Accept-Encoding"] = "identity"
    if not any(name.lower() == "user-agent" for name in sent):
        sent["User-Agent"] = DEFAULT_USER_AGENT
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
