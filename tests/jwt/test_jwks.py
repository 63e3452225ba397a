"""JWKS fetching: a real loopback HTTP server for transport limits, MockTransport for the rest."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from parley.errors import JwksUnreachable
from parley.jwt import JwksFetcher, JwksFetchError, is_public_address, parse_max_age

pytestmark = pytest.mark.anyio

JWKS = {
    "keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]
}
BODY = json.dumps(JWKS).encode()


class _Handler(BaseHTTPRequestHandler):
    """Routes of the test server; each path exercises one limit of API.md section 7."""

    server: _Server

    def log_message(self, *_args: object) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.server.requests.append(url.path)
        route = getattr(self, "route_" + url.path.strip("/").replace("-", "_"), None)
        try:
            if route is None:
                self._send(404, b"not found")
            else:
                route(parse_qs(url.query))
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: expected
            return

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def route_jwks(self, query: dict[str, list[str]]) -> None:
        headers = {"Content-Type": "application/json"}
        if "cc" in query:
            headers["Cache-Control"] = query["cc"][0]
        self._send(200, BODY, headers)

    def route_redirect(self, _query: dict[str, list[str]]) -> None:
        self._send(302, b"", {"Location": "/jwks"})

    def route_endless(self, _query: dict[str, list[str]]) -> None:
        self.send_response(200)  # no Content-Length: the body ends when the server closes
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b" " * 16384
        for _ in range(4096):  # 64 MiB at most, so the test ends even if the client kept reading
            if self.server.stopping.is_set():
                return
            self.wfile.write(chunk)
            self.server.bytes_sent += len(chunk)

    def route_declared_huge(self, _query: dict[str, list[str]]) -> None:
        self._send(200, BODY, {"Content-Length": str(10 * 1024 * 1024)})

    def route_slow(self, _query: dict[str, list[str]]) -> None:
        self.server.stopping.wait(2.0)
        self._send(200, BODY)

    def route_drip(self, _query: dict[str, list[str]]) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        for byte in BODY:
            if self.server.stopping.wait(0.05):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def route_gzip(self, _query: dict[str, list[str]]) -> None:
        self._send(200, BODY, {"Content-Encoding": "gzip"})

    def route_error(self, _query: dict[str, list[str]]) -> None:
        self._send(500, b"{}")

    def route_not_json(self, _query: dict[str, list[str]]) -> None:
        self._send(200, b"<html>hello</html>")

    def route_no_keys(self, _query: dict[str, list[str]]) -> None:
        self._send(200, b'{"issuer": "x"}')


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[str] = []
        self.bytes_sent = 0
        self.stopping = threading.Event()


@pytest.fixture
def server() -> Iterator[_Server]:
    """A real HTTP server on loopback, stopped after the test."""
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield srv
    finally:
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def url_of(srv: _Server, path: str) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


async def fetch_local(url: str, *, deadline: float = 3.0) -> object:
    async with httpx.AsyncClient(trust_env=False) as client:
        fetcher = JwksFetcher(
            client, allow_http=True, allow_private_networks=True, timeout_seconds=deadline
        )
        return await fetcher.fetch(url)


async def test_fetch_loopback_jwks_returns_document_and_max_age(server: _Server) -> None:
    fetched = await fetch_local(url_of(server, "/jwks?cc=public,%20max-age=3600"))
    assert fetched.document == JWKS  # type: ignore[attr-defined]
    assert fetched.max_age_seconds == 3600  # type: ignore[attr-defined]


async def test_fetch_redirect_not_followed(server: _Server) -> None:
    with pytest.raises(JwksFetchError, match="redirect"):
        await fetch_local(url_of(server, "/redirect"))
    assert server.requests == ["/redirect"]


async def test_fetch_endless_body_stops_at_256_kib(server: _Server) -> None:
    started = time.monotonic()
    with pytest.raises(JwksFetchError, match="256 KiB"):
        await fetch_local(url_of(server, "/endless"))
    assert time.monotonic() - started < 2.5
    assert server.bytes_sent < 64 * 1024 * 1024


async def test_fetch_declared_huge_body_refused_before_reading(server: _Server) -> None:
    with pytest.raises(JwksFetchError, match="256 KiB"):
        await fetch_local(url_of(server, "/declared-huge"))


async def test_fetch_slow_answer_times_out(server: _Server) -> None:
    started = time.monotonic()
    with pytest.raises(JwksFetchError, match="in time"):
        await fetch_local(url_of(server, "/slow"), deadline=0.3)
    assert time.monotonic() - started < 1.5


async def test_fetch_drip_fed_body_hits_total_deadline(server: _Server) -> None:
    with pytest.raises(JwksFetchError, match="in time"):
        await fetch_local(url_of(server, "/drip"), deadline=0.5)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/gzip", "compressed"),
        ("/error", "HTTP 500"),
        ("/not-json", "JSON object"),
        ("/no-keys", "keys"),
        ("/missing", "HTTP 404"),
    ],
    ids=["gzip", "status-500", "not-json", "no-keys-array", "not-found"],
)
async def test_fetch_bad_answer_refused(server: _Server, path: str, reason: str) -> None:
    with pytest.raises(JwksFetchError, match=reason) as caught:
        await fetch_local(url_of(server, path))
    assert "127.0.0.1" not in caught.value.message


async def test_fetch_loopback_refused_without_private_networks(server: _Server) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        fetcher = JwksFetcher(client, allow_http=True)
        with pytest.raises(JwksFetchError, match="public") as caught:
            await fetcher.fetch(url_of(server, "/jwks"))
    assert server.requests == []
    assert "PARLEY_JWKS_ALLOW_PRIVATE_NETWORKS=true" in caught.value.message


# --- MockTransport: the address guard and the request shape -------------------------


def resolver(*addresses: str) -> object:
    async def resolve(host: str, port: int) -> Sequence[str]:
        return list(addresses)

    return resolve


def mock_fetcher(
    handler: object, *addresses: str, **options: bool
) -> tuple[JwksFetcher, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))  # type: ignore[arg-type]
    return JwksFetcher(client, resolve=resolver(*addresses), **options), client  # type: ignore[arg-type]


async def test_fetch_pins_checked_address_and_keeps_host() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=JWKS)

    fetcher, client = mock_fetcher(handler, "93.184.216.34", "2606:2800:220:1::1")
    async with client:
        fetched = await fetcher.fetch("https://keys.example.com/.well-known/jwks.json")
    assert fetched.max_age_seconds == 600
    (request,) = seen
    assert request.url.host == "93.184.216.34"
    assert request.url.scheme == "https"
    assert request.headers["host"] == "keys.example.com"
    assert request.headers["accept-encoding"] == "identity"
    assert request.extensions["sni_hostname"] == "keys.example.com"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 - an address under test, not a binding
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
        "2002:a00:1::",
        "not-an-ip",
    ],
)
def test_is_public_address_internal_refused(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_is_public_address_global_accepted(address: str) -> None:
    assert is_public_address(address)


async def test_fetch_any_private_answer_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    fetcher, client = mock_fetcher(handler, "93.184.216.34", "10.0.0.7")
    async with client:
        with pytest.raises(JwksFetchError, match="public"):
            await fetcher.fetch("https://rebind.example.com/jwks")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://keys.example.com/jwks", "https"),
        ("ftp://keys.example.com/jwks", "https"),
        ("https://user:pw@keys.example.com/jwks", "credentials"),
        ("/relative/jwks", "https"),
        ("https://", "valid URL|host"),
    ],
    ids=["http", "ftp", "userinfo", "relative", "no-host"],
)
async def test_fetch_unacceptable_url_refused(url: str, reason: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    fetcher, client = mock_fetcher(handler, "93.184.216.34")
    async with client:
        with pytest.raises(JwksFetchError, match=reason):
            await fetcher.fetch(url)


async def test_fetch_http_allowed_when_configured() -> None:
    fetcher, client = mock_fetcher(
        lambda _: httpx.Response(200, json=JWKS), "93.184.216.34", allow_http=True
    )
    async with client:
        assert (await fetcher.fetch("http://keys.example.com/jwks")).document == JWKS


@pytest.mark.parametrize("url", ["ftp://keys.example.com/jwks", "/relative/jwks"])
async def test_fetch_other_scheme_with_http_allowed_does_not_advise_allowing_http(
    url: str,
) -> None:
    """With PARLEY_JWKS_ALLOW_HTTP already on, the refusal names what is allowed instead."""
    fetcher, client = mock_fetcher(lambda _: httpx.Response(200, json=JWKS), "93.184.216.34",
                                   allow_http=True)  # fmt: skip
    async with client:
        with pytest.raises(JwksFetchError) as caught:
            await fetcher.fetch(url)
    assert "https or http" in caught.value.message
    assert "PARLEY_JWKS_ALLOW_HTTP" not in caught.value.message


async def test_fetch_connection_error_is_safe_fetch_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused to 93.184.216.34")

    fetcher, client = mock_fetcher(handler, "93.184.216.34")
    async with client:
        with pytest.raises(JwksUnreachable) as caught:
            await fetcher.fetch("https://keys.example.com/jwks")
    assert caught.value.code == "jwks_unreachable"
    assert "93.184" not in caught.value.message


async def test_fetch_dns_failure_is_fetch_error() -> None:
    async def failing(host: str, port: int) -> Sequence[str]:
        raise socket.gaierror("Name or service not known")

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200))
    ) as client:
        fetcher = JwksFetcher(client, resolve=failing)
        with pytest.raises(JwksFetchError, match="resolved"):
            await fetcher.fetch("https://nowhere.invalid/jwks")


async def test_fetch_no_address_is_fetch_error() -> None:
    fetcher, client = mock_fetcher(lambda _: httpx.Response(200, json=JWKS))
    async with client:
        with pytest.raises(JwksFetchError, match="resolved"):
            await fetcher.fetch("https://keys.example.com/jwks")


@pytest.mark.parametrize(
    "length",
    [b"abc", b"9" * 40, "\u00b2".encode("latin-1")],
    ids=["letters", "40-digits", "superscript"],
)
async def test_fetch_invalid_content_length_refused(length: bytes) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"{}", headers=[(b"Content-Length", length)])

    fetcher, client = mock_fetcher(handler, "93.184.216.34")
    async with client:
        with pytest.raises(JwksFetchError, match="Content-Length"):
            await fetcher.fetch("https://keys.example.com/jwks")


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 600),
        ("max-age=3600", 3600),
        ("public, max-age=1200, must-revalidate", 1200),
        ("max-age=60", 300),
        ("max-age=9999999", 86400),
        ('max-age="900"', 900),
        ("MAX-AGE=900", 900),
        ("no-store", 300),
        ("no-cache, max-age=3600", 300),
        ("max-age=abc", 600),
        ("max-age=" + "9" * 40, 600),
        ("max-age=-5", 600),
        ("s-maxage=7200", 600),
    ],
)
def test_parse_max_age_clamped(header: str | None, seconds: int) -> None:
    assert parse_max_age(header) == seconds


async def test_fetch_http_refusal_names_the_operator_switch() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request may be sent")

    fetcher, client = mock_fetcher(handler, "93.184.216.34")
    async with client:
        with pytest.raises(JwksFetchError) as caught:
            await fetcher.fetch("http://example.com/jwks.json")
    assert caught.value.message == (
        "The JWKS URL must use https "
        "(set PARLEY_JWKS_ALLOW_HTTP=true to allow http, e.g. for local testing)."
    )
