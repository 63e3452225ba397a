"""Run by tests/outbound/test_tls_name.py in a process whose SSL_CERT_FILE is a test CA (the
HTTP library reads the trusted roots once, at import): an https server on 127.0.0.1 holds a
certificate for `hooks.test` only; both names below resolve to it. Prints, as JSON, what a
call to each name gave and the SNI names the server saw.

    python -m tests.outbound.tls_probe CERT_FILE KEY_FILE
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from parley.outbound import AddressPolicy, OutboundClient, OutboundError

POLICY = AddressPolicy(allow_private_networks=True)  # https only, loopback allowed


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        return

    def do_GET(self) -> None:
        body = json.dumps({"host": self.headers.get("Host", "")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


async def _loopback(host: str, port: int) -> Sequence[str]:
    return ["127.0.0.1"]


async def _probe(cert: str, key: str) -> dict[str, object]:
    seen: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def record_sni(_socket: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        seen.append(name)

    context.sni_callback = record_sni  # type: ignore[assignment] # typeshed wants SSLSocket
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    port = server.server_address[1]
    client = OutboundClient(resolve=_loopback)
    results: dict[str, object] = {}
    try:
        for name in ("hooks.test", "other.test"):
            try:
                answer = await client.request(
                    "GET", f"https://{name}:{port}/", policy=POLICY, timeout_s=5, max_bytes=4096
                )
            except OutboundError as error:
                results[name] = type(error).__name__
            else:
                results[name] = json.loads(answer.body)["host"]
    finally:
        await client.aclose()
        server.shutdown()
    return {"results": results, "sni": seen}


def main() -> None:
    found = asyncio.run(_probe(sys.argv[1], sys.argv[2]))
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
