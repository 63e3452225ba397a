"""Kept-alive connections, one pool per host name: a connection opened (and verified) for
one host name never carries a request for another, even to the same address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from parley.outbound import AddressPolicy, OutboundClient

pytestmark = pytest.mark.anyio

LOCAL = AddressPolicy(allow_http=True, allow_private_networks=True)


class _KeepAlive(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # connections stay open between requests
    server: _Recording

    def log_message(self, *_args: object) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.client_address[1], self.headers.get("Host", "")))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Recording(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _KeepAlive)
        self.seen: list[tuple[int, str]] = []


@pytest.fixture
def server() -> Iterator[_Recording]:
    running = _Recording()
    thread = threading.Thread(
        target=running.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()


async def test_keepalive_same_host_name_reuses_connection(server: _Recording) -> None:
    port = server.server_address[1]
    client = OutboundClient()
    try:
        for _ in range(3):
            answer = await client.request(
                "POST", f"http://127.0.0.1:{port}/a", policy=LOCAL, timeout_s=3, max_bytes=1024
            )
            assert answer.status == 200
    finally:
        await client.aclose()

    assert len({client_port for client_port, _ in server.seen}) == 1


async def test_keepalive_other_host_name_same_address_gets_own_connection(
    server: _Recording,
) -> None:
    port = server.server_address[1]

    async def both_loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    client = OutboundClient(resolve=both_loopback)
    try:
        for host in ("alpha.test", "beta.test", "alpha.test", "beta.test"):
            await client.request(
                "POST", f"http://{host}:{port}/a", policy=LOCAL, timeout_s=3, max_bytes=1024
            )
    finally:
        await client.aclose()

    by_host: dict[str, set[int]] = {}
    for client_port, host in server.seen:
        by_host.setdefault(host, set()).add(client_port)
    assert set(by_host) == {f"alpha.test:{port}", f"beta.test:{port}"}
    assert all(len(ports) == 1 for ports in by_host.values()), by_host  # each kept alive
    assert by_host[f"alpha.test:{port}"].isdisjoint(by_host[f"beta.test:{port}"])


async def test_keepalive_other_policy_same_address_gets_own_connection(
    server: _Recording,
) -> None:
    port = server.server_address[1]
    jwks = AddressPolicy(
        allow_http=True,
        allow_private_networks=True,
        subject="The JWKS URL",
        switches="PARLEY_JWKS_ALLOW",
    )
    client = OutboundClient()
    try:
        for policy in (LOCAL, jwks, LOCAL, jwks):
            await client.request(
                "POST", f"http://127.0.0.1:{port}/a", policy=policy, timeout_s=3, max_bytes=1024
            )
    finally:
        await client.aclose()

    ports = [client_port for client_port, _ in server.seen]
    assert ports[0] == ports[2]  # each policy's connection kept alive
    assert ports[1] == ports[3]
    assert ports[0] != ports[1]
