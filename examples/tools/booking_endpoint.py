"""A webhook tool endpoint for Parley: verify the signature, then answer JSON.

Run it (Python 3.11+, `pip install standardwebhooks`):

    BOOKING_SIGNING_SECRET=whsec_... python examples/tools/booking_endpoint.py --port 8080

`BOOKING_SIGNING_SECRET` is the `signing_secret` that `POST /v1/tools` showed once. Parley
calls `POST /bookings` with a JSON body (the model's arguments plus `conversation_id`) and
Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`). This
endpoint:

1. refuses a body over 64 KiB (413) and a request whose signature does not verify (401):
   anyone on the internet can reach this URL, only Parley holds the secret;
2. books a table once per `Idempotency-Key` (the tool call's ID): Parley never retries a
   call, but a proxy in front of you might, so a repeated key gets the first answer again;
3. answers 200 with a small JSON object: that object is what the language model reads.

Answer well within the tool's `endpoint_timeout_ms` (default 5 s) and keep answers under
64 KiB: Parley reads no more, and a late, larger or non-JSON answer reaches the model as
`{"error": "..."}` instead. Standard library only, besides `standardwebhooks`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

MAX_BODY = 64 * 1024


class BookingServer(ThreadingHTTPServer):
    """Holds the verifier and the bookings made, by idempotency key."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], secret: str) -> None:
        super().__init__(address, BookingHandler)
        self.webhook = Webhook(secret)
        self.bookings: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def book(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Book once per key; a repeated key gets the first booking back."""
        with self.lock:
            if key not in self.bookings:
                self.bookings[key] = {
                    "status": "confirmed",
                    "booking_id": f"BK-{len(self.bookings) + 1:04d}",
                    "people": request.get("people"),
                    "time": request.get("time"),
                    "name": request.get("name"),
                }
            return self.bookings[key]


class BookingHandler(BaseHTTPRequestHandler):
    server: BookingServer

    def do_POST(self) -> None:
        if self.path != "/bookings":
            self.answer(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.answer(413, {"error": "body too large"})
            return
        body = self.rfile.read(length)
        try:
            # Checks the HMAC over "{webhook-id}.{webhook-timestamp}.{body}" and that the
            # timestamp is within 5 minutes of now (a captured request cannot be replayed later).
            request = self.server.webhook.verify(body, dict(self.headers.items()))
        except WebhookVerificationError:
            log("refused a request whose signature did not verify")
            self.answer(401, {"error": "invalid signature"})
            return
        if not isinstance(request, dict):
            self.answer(400, {"error": "expected a JSON object"})
            return
        key = self.headers.get("Idempotency-Key") or self.headers["webhook-id"]
        booking = self.server.book(key, request)
        log(f"verified call {self.headers['webhook-id']}: booked {booking['booking_id']}")
        self.answer(200, booking)

    def answer(self, status: int, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        return  # one line per call is printed by do_POST; no headers, no bodies


def log(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - a command-line program's output


def main() -> None:
    parser = argparse.ArgumentParser(description="A signed webhook tool endpoint: /bookings")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    args = parser.parse_args()
    secret = os.environ.get("BOOKING_SIGNING_SECRET", "")
    if not secret.startswith("whsec_"):
        sys.exit("Set BOOKING_SIGNING_SECRET to the tool's signing_secret (whsec_...).")
    server = BookingServer((args.host, args.port), secret)
    log(f"listening on http://{args.host}:{server.server_address[1]}/bookings")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
