"""Standard Webhooks signatures (standardwebhooks.com; API.md sections 12 and 14).

A secret is `whsec_` + base64 of 32 random bytes; the HMAC key is those bytes. A signature
is `v1,` + base64 of HMAC-SHA256 over `{msg_id}.{timestamp}.{body}`. The headers carry one
space-separated `v1,…` entry per secret (two while a rotated secret is still honoured), and
with `svix=True` the same three values again under the `svix-` names, so both the
`standardwebhooks` and `svix` receiver libraries verify them.

Signing goes through the `standardwebhooks` library (STYLE convention 22), whose `sign`
takes the body as text: bodies are UTF-8 (JSON, or empty for a GET).
"""

from __future__ import annotations

import base64
import secrets as random_bytes
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES: Final = 32


def new_signing_secret() -> str:
    """A fresh secret: `whsec_` + base64 of 32 random bytes (shown once to its owner)."""
    return SECRET_PREFIX + base64.b64encode(random_bytes.token_bytes(SECRET_BYTES)).decode()


def sign(secret: str, *, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return `v1,<base64 HMAC-SHA256>` of `{msg_id}.{timestamp}.{body}` keyed by `secret`.

    Raises ValueError if `secret` is not a `whsec_` secret or `body` is not UTF-8.
    """
    if not secret.startswith(SECRET_PREFIX) or len(secret) <= len(SECRET_PREFIX):
        raise ValueError("a signing secret starts with whsec_")
    at = datetime.fromtimestamp(timestamp, tz=UTC)
    signature: str = Webhook(secret).sign(msg_id, at, body.decode("utf-8"))
    return signature


def signature_headers(
    secrets: Sequence[str], *, msg_id: str, timestamp: int, body: bytes, svix: bool = False
) -> dict[str, str]:
    """The Standard Webhooks headers of one message, signed by every secret in `secrets`."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    signature = " ".join(
        sign(secret, msg_id=msg_id, timestamp=timestamp, body=body) for secret in secrets
    )
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
    if svix:
        headers |= {
            "svix-id": msg_id,
            "svix-timestamp": str(timestamp),
            "svix-signature": signature,
        }
    return headers
