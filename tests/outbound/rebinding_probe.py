"""Run inside tests/outbound/netns.py's namespace: one host name first resolves to a loopback
service, then (the hosts file rewritten, as a changed DNS answer) to a public address, both
serving the same port over kept-alive HTTP/1.1. Prints, as JSON, which service answered the
second call: `internal` means a pooled loopback connection carried it.

    python -m tests.outbound.rebinding_probe SCENARIO HOSTS_FILE PUBLIC_ADDRESS

Scenarios (the first call, then the second):
- `two-policies`: a JWKS fetch (PARLEY_JWKS_ALLOW_HTTP and _PRIVATE_NETWORKS on), then a
  webhook tool's call (PARLEY_OUTBOUND_ALLOW_HTTP on, private networks off), through one
  `OutboundClient`, as the serving process makes them;
- `one-policy`: two calls under one policy that allows private networks.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from parley.jwt.jwks import JwksFetcher
from parley.outbound import AddressPolicy, OutboundClient

NAME = "svc.example.com"


class _Service(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: str, port: int, who: str) -> None:
        super().__init__((address, port), _Handler)
        self.who = who
        self.paths: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # connections stay open between requests
    server: _Service

    def log_message(self, *_args: object) -> None:
        return

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.paths.append(self.path)
        body = json.dumps({"keys": [], "who": self.server.who}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer


def _point(hosts: Path, address: str) -> None:
    """Make NAME resolve to `address` (in place: the bind mount follows the file's inode)."""
    hosts.write_text(f"{address} {NAME}\n")


def _serve(service: _Service) -> None:
    threading.Thread(
        target=service.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()


async def _probe(scenario: str, hosts: Path, public: str) -> dict[str, object]:
    internal = _Service("127.0.0.1", 0, "internal")
    port = internal.server_address[1]
    outside = _Service(public, port, "public")
    _serve(internal)
    _serve(outside)
    client = OutboundClient()
    tools = AddressPolicy(allow_http=True, allow_private_networks=scenario == "one-policy")
    url = f"http://{NAME}:{port}"
    try:
        _point(hosts, "127.0.0.1")
        if scenario == "two-policies":
            fetcher = JwksFetcher(client, allow_http=True, allow_private_networks=True)
            await fetcher.fetch(f"{url}/jwks")
        else:
            await client.request("POST", f"{url}/first", policy=tools, timeout_s=5, max_bytes=4096)
        _point(hosts, public)
        answer = await client.request(
            "POST", f"{url}/tool", policy=tools, timeout_s=5, max_bytes=4096
        )
    finally:
        await client.aclose()
        internal.shutdown()
        outside.shutdown()
    return {
        "second_answered_by": json.loads(answer.body)["who"],
        "internal_paths": internal.paths,
        "public_paths": outside.paths,
    }


def main() -> None:
    scenario, hosts, public = sys.argv[1:4]
    found = asyncio.run(_probe(scenario, Path(hosts), public))
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
