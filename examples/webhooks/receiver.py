"""A receiver of Parley's webhooks: verify each delivery, then act on its event.

Run it (Python 3.11+, `pip install standardwebhooks` or `pip install svix`):

    WEBHOOK_SECRET=whsec_... python examples/webhooks/receiver.py --port 9000 \
        [--library standardwebhooks|svix]

`WEBHOOK_SECRET` is the `secret` that `POST /v1/webhooks` showed once (after a
rotation, the new one: Parley signs with both for 24 h). Parley sends `POST` with a JSON
body `{"id", "event_type", "created_at", "data"}` and the headers `webhook-id`,
`webhook-timestamp`, `webhook-signature` (and the same three as `svix-*`). This receiver:

1. refuses a body over 1 MiB (413) and a delivery whose signature does not verify, or whose
   timestamp is more than 5 minutes away (401): anyone can reach this URL, only Parley
   holds the secret;
2. skips a delivery it has seen already (same `webhook-id`): delivery is at least once, so
   a retry after a lost answer repeats one;
3. answers 204 at once, and does its work afterwards: an answer slower than 15 s counts as
   a failure and the delivery is sent again later.

It prints one JSON line per new event, e.g. `{"event_type": "conversation.ended", ...}`.
Standard library only, besides the verifying library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 1024 * 1024

Verify = Callable[[bytes, Mapping[str, str]], dict[str, Any]]


def standardwebhooks_verifier(secret: str) -> Verify:
    """Verify with the Standard Webhooks library (`webhook-*` headers)."""
    from standardwebhooks import Webhook

    webhook = Webhook(secret)

    def verify(body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        event: dict[str, Any] = webhook.verify(body, dict(headers))  # raises if it fails
        return event

    return verify


def svix_verifier(secret: str) -> Verify:
    """Verify with the Svix library (`svix-*` headers)."""
    from svix.webhooks import Webhook

    webhook = Webhook(secret)

    def verify(body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        webhook.verify(body, dict(headers))  # raises WebhookVerificationError if it fails
        event: dict[str, Any] = json.loads(body)
        return event

    return verify


class Receiver(ThreadingHTTPServer):
    """Holds the verifier and the IDs of the deliveries already handled."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], verify: Verify) -> None:
        super().__init__(address, Handler)
        self.verify = verify
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def first_time(self, msg_id: str) -> bool:
        with self.lock:
            if msg_id in self.seen:
                return False
            self.seen.add(msg_id)
            return True


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *_args: object) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.answer(413)
            return
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            event = self.server.verify(body, headers)
        except Exception:  # each library raises its own verification error
            self.answer(401)
            return
        self.answer(204)
        if self.server.first_time(headers.get("webhook-id") or headers.get("svix-id", "")):
            handle(event)

    def answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def handle(event: dict[str, Any]) -> None:
    """Your work: here, one line per event (a CRM update, a ticket, an alert...)."""
    data = event["data"]
    summary: dict[str, Any] = {"id": event["id"], "event_type": event["event_type"]}
    if "agent" in data:
        summary["agent"] = data["agent"]["name"]
    if "conversation" in data:
        conversation = data["conversation"]
        summary["conversation"] = conversation["id"]
        summary["items"] = len(conversation["items"])
    print(json.dumps(summary), flush=True)  # noqa: T201 - the example's output


def main() -> None:
    parser = argparse.ArgumentParser(description="Receive and verify Parley's webhooks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument(
        "--library", choices=["standardwebhooks", "svix"], default="standardwebhooks"
    )
    args = parser.parse_args()
    secret = os.environ.get("WEBHOOK_SECRET", "")
    if not secret.startswith("whsec_"):
        sys.exit("set WEBHOOK_SECRET to the webhook's whsec_... secret")
    make = standardwebhooks_verifier if args.library == "standardwebhooks" else svix_verifier
    server = Receiver((args.host, args.port), make(secret))
    print(f"listening on http://{args.host}:{args.port}/", file=sys.stderr, flush=True)  # noqa: T201
    server.serve_forever()


if __name__ == "__main__":
    main()
