"""A real JWKS endpoint on loopback whose document, availability and fetch count tests steer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


class JwksServer(ThreadingHTTPServer):
    """Serves `document` at /jwks.json with `Cache-Control: max-age`; 503 while `down`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.document: dict[str, Any] = {"keys": []}
        self.max_age = 600
        self.down = False
        self.fetches = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/jwks.json"

    def publish(self, *jwks: dict[str, str]) -> None:
        """Publish exactly these public JWKs."""
        self.document = {"keys": list(jwks)}

    def count(self) -> None:
        with self._lock:
            self.fetches += 1


class _Handler(BaseHTTPRequestHandler):
    server: JwksServer

    def log_message(self, *_args: object) -> None:
        return

    def do_GET(self) -> None:
        self.server.count()
        if self.server.down or self.path != "/jwks.json":
            self.send_response(503 if self.server.down else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(self.server.document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", f"max-age={self.server.max_age}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve `server` from a thread for the block's duration, then stop and close it."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def running_jwks_server() -> Iterator[JwksServer]:
    with serving(JwksServer()) as server:
        yield server
